// bench_dispatcher: per-task overhead of the Purine dispatcher on DAGs of empty tasks, side by
// side with TBB's flow graph (continue_node) on the same DAGs in the same process.
//
//   bench_dispatcher [--tasks=100000] [--reps=11] [--window=1000] [--assign=any,random]
//
// Shapes: "chain" (task i depends on i-1) and "wide" (task i depends on 1-4 distinct random
// tasks among the previous --window). Purine runs each shape on 1 and on 2 executors; with 2,
// once per placement in --assign: "any" leaves every task to the dispatcher (kAnyExecutor),
// as TBB's scheduler is left to place its tasks, and random, round_robin or halves pin each task
// to an executor, as ops are pinned to their threads in a graph. TBB runs it with 1 and with 2
// threads (tbb::global_control). Setup (plan, engine, graph construction) is not timed; every
// configuration gets one untimed warm-up run, then --reps timed runs. Prints ns per task
// (median and best of the runs), the ratio Purine/TBB of the medians, the machine's load average
// and the cost of one bare hand-over between two threads (the floor for tasks that alternate
// between executors; TBB does not pin tasks to threads, so it never pays it on a chain).
#include <gflags/gflags.h>
#include <tbb/flow_graph.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dispatcher/engine.hpp"

DEFINE_int32(tasks, 100000, "tasks per DAG");
DEFINE_int32(reps, 11, "timed runs per configuration");
DEFINE_int32(window, 1000, "wide DAG: predecessors are drawn among the previous N tasks");
DEFINE_string(assign, "any,random",
              "with 2+ executors, the task placements to time (comma-separated): any (every task "
              "kAnyExecutor: the dispatcher places it) or pinned: random, round_robin, halves");
DEFINE_int32(idle_spin_us, 50, "EngineOptions::idle_spin in microseconds");
DEFINE_uint64(seed, 1, "seed for the wide DAG and the random assignment");
DEFINE_string(shapes, "chain,wide", "comma-separated shapes to time: chain, wide");
DEFINE_string(threads, "1,2", "comma-separated executor / TBB thread counts");
DEFINE_bool(tbb, true, "also time TBB flow graph");

namespace pd = purine::dispatch;
using Clock = std::chrono::steady_clock;

namespace {

struct Dag {
  std::string name;
  std::vector<std::vector<int>> predecessors;
};

Dag chain(int n) {
  Dag dag{"chain", std::vector<std::vector<int>>(n)};
  for (int i = 1; i < n; ++i) dag.predecessors[i].push_back(i - 1);
  return dag;
}

Dag wide(int n, int window, std::mt19937_64& gen) {
  Dag dag{"wide", std::vector<std::vector<int>>(n)};
  for (int i = 1; i < n; ++i) {
    const int lo = std::max(0, i - window);
    const int count = std::uniform_int_distribution<int>(1, 4)(gen);
    std::vector<int>& preds = dag.predecessors[i];
    for (int k = 0; k < count; ++k)
      preds.push_back(std::uniform_int_distribution<int>(lo, i - 1)(gen));
    std::sort(preds.begin(), preds.end());
    preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
  }
  return dag;
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    if (comma > start) parts.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return parts;
}

// The 1-minute load average: timings of threads that hand work over mean little on a busy machine.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one_minute = "?";
  in >> one_minute;
  return one_minute;
}

struct Stats {
  double median_ns = 0;
  double best_ns = 0;
};

Stats stats(std::vector<double> ns_per_task) {
  std::sort(ns_per_task.begin(), ns_per_task.end());
  return {ns_per_task[ns_per_task.size() / 2], ns_per_task.front()};
}

template <typename RunOnce>
Stats time_runs(int n, RunOnce run_once) {
  run_once();  // warm-up
  std::vector<double> samples;
  for (int r = 0; r < FLAGS_reps; ++r) {
    const Clock::time_point start = Clock::now();
    run_once();
    samples.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count() / n);
  }
  return stats(samples);
}

int executor_of(const std::string& assign, int task, int n, int executors, std::mt19937_64& gen) {
  if (executors == 1) return 0;
  if (assign == "any") return pd::kAnyExecutor;
  if (assign == "round_robin") return task % executors;
  if (assign == "halves") return static_cast<int>(static_cast<int64_t>(task) * executors / n);
  return std::uniform_int_distribution<int>(0, executors - 1)(gen);
}

Stats bench_purine(const Dag& dag, int executors, const std::string& assign) {
  const int n = static_cast<int>(dag.predecessors.size());
  std::mt19937_64 gen(FLAGS_seed + 17);
  pd::Plan plan;
  for (int e = 0; e < executors; ++e) plan.add_executor({"cpu/" + std::to_string(e)});
  for (int i = 0; i < n; ++i) {
    pd::Task task;
    task.name = "t" + std::to_string(i);
    task.executor = executor_of(assign, i, n, executors, gen);
    task.run = [] {};
    plan.add_task(std::move(task));
  }
  for (int i = 0; i < n; ++i) {
    for (int p : dag.predecessors[i]) plan.add_dependency(p, i);
  }
  pd::EngineOptions options;
  options.idle_spin = std::chrono::microseconds(FLAGS_idle_spin_us);
  pd::Engine engine(std::move(plan), options);
  return time_runs(n, [&] { engine.run(); });
}

Stats bench_tbb(const Dag& dag, int threads) {
  namespace flow = tbb::flow;
  const int n = static_cast<int>(dag.predecessors.size());
  tbb::global_control control(tbb::global_control::max_allowed_parallelism, threads);
  flow::graph graph;
  std::vector<std::unique_ptr<flow::continue_node<flow::continue_msg>>> nodes;
  nodes.reserve(n);
  for (int i = 0; i < n; ++i) {
    nodes.push_back(std::make_unique<flow::continue_node<flow::continue_msg>>(
        graph, [](const flow::continue_msg&) { return flow::continue_msg(); }));
  }
  std::vector<int> sources;
  for (int i = 0; i < n; ++i) {
    if (dag.predecessors[i].empty()) sources.push_back(i);
    for (int p : dag.predecessors[i]) flow::make_edge(*nodes[p], *nodes[i]);
  }
  return time_runs(n, [&] {
    for (int s : sources) nodes[s]->try_put(flow::continue_msg());
    graph.wait_for_all();
  });
}

// The floor under any hand-over between two threads on this machine: two threads bouncing an
// atomic counter, waiting the way idle executors do (yielding on every turn). Tasks alternating
// between two executors cannot be handed over faster than this.
double handover_floor_ns() {
  constexpr int kHandovers = 100000;
  std::atomic<int> turn{0};
  auto player = [&turn](int first) {
    for (int i = first; i < kHandovers; i += 2) {
      while (turn.load(std::memory_order_acquire) != i) std::this_thread::yield();
      turn.store(i + 1, std::memory_order_release);
    }
  };
  const Clock::time_point start = Clock::now();
  std::thread a(player, 0), b(player, 1);
  a.join();
  b.join();
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count() / kHandovers;
}

// A hand-over to an executor that has been idle for `idle_us`: task A on executor 0 works that
// long, then its successors B (on executor 1) and C (on executor 0) become ready. Returns the
// medians over `runs` runs of how long after A's end C started (what the hand-over cost the
// giver) and B started (when the receiver took it). Idle past EngineOptions::idle_spin, the
// receiver sleeps on its condition variable and the giver has to wake it.
struct HandOver {
  double giver_us = 0;
  double receiver_us = 0;
};

void busy_wait(std::chrono::microseconds duration) {
  const Clock::time_point until = Clock::now() + duration;
  while (Clock::now() < until) {
  }
}

// A task named `name` that runs `run` on executor `executor`.
pd::Task task_on(const char* name, pd::ExecutorId executor, std::function<void()> run) {
  pd::Task task;
  task.name = name;
  task.executor = executor;
  task.run = std::move(run);
  return task;
}

HandOver hand_over(int idle_us, int runs) {
  Clock::time_point a_end, b_start, c_start;
  pd::Plan plan;
  plan.add_executor({"cpu/0"});
  plan.add_executor({"cpu/1"});
  const pd::TaskId a = plan.add_task(task_on("a", 0, [&] {
    busy_wait(std::chrono::microseconds(idle_us));
    a_end = Clock::now();
  }));
  const pd::TaskId b = plan.add_task(task_on("b", 1, [&] { b_start = Clock::now(); }));
  const pd::TaskId c = plan.add_task(task_on("c", 0, [&] { c_start = Clock::now(); }));
  plan.add_dependency(a, b);
  plan.add_dependency(a, c);
  pd::EngineOptions options;
  options.idle_spin = std::chrono::microseconds(FLAGS_idle_spin_us);
  pd::Engine engine(std::move(plan), options);
  std::vector<double> giver, receiver;
  engine.run();  // warm-up
  for (int r = 0; r < runs; ++r) {
    engine.run();
    giver.push_back(std::chrono::duration<double, std::micro>(c_start - a_end).count());
    receiver.push_back(std::chrono::duration<double, std::micro>(b_start - a_end).count());
  }
  std::sort(giver.begin(), giver.end());
  std::sort(receiver.begin(), receiver.end());
  return {giver[giver.size() / 2], receiver[receiver.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("per-task overhead of the Purine dispatcher vs TBB flow graph");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  std::mt19937_64 gen(FLAGS_seed);
  std::vector<Dag> dags;
  for (const std::string& shape : split(FLAGS_shapes)) {
    if (shape == "chain") {
      dags.push_back(chain(FLAGS_tasks));
    } else if (shape == "wide") {
      dags.push_back(wide(FLAGS_tasks, FLAGS_window, gen));
    } else {
      std::fprintf(stderr, "error: unknown shape '%s' (known: chain, wide)\n", shape.c_str());
      return 1;
    }
  }

  std::printf(
      "tasks=%d reps=%d window=%d assign=%s idle_spin=%dus hardware_threads=%u "
      "loadavg=%s; ns per task, median (best)\n",
      FLAGS_tasks, FLAGS_reps, FLAGS_window, FLAGS_assign.c_str(), FLAGS_idle_spin_us,
      std::thread::hardware_concurrency(), load_average().c_str());
  std::printf("%-6s %-8s %-12s %22s %22s %11s\n", "shape", "threads", "placement", "purine ns/task",
              "tbb ns/task", "purine/tbb");
  for (const Dag& dag : dags) {
    for (const std::string& count : split(FLAGS_threads)) {
      const int threads = std::stoi(count);
      const Stats tbb = FLAGS_tbb ? bench_tbb(dag, threads) : Stats{};
      const std::vector<std::string> placements =
          threads == 1 ? std::vector<std::string>{"-"} : split(FLAGS_assign);
      for (const std::string& assign : placements) {
        const Stats purine = bench_purine(dag, threads, assign);
        std::printf("%-6s %-8d %-12s %12.1f (%7.1f) %12.1f (%7.1f) %11.2f\n", dag.name.c_str(),
                    threads, assign.c_str(), purine.median_ns, purine.best_ns, tbb.median_ns,
                    tbb.best_ns, purine.median_ns / tbb.median_ns);
        std::fflush(stdout);
      }
    }
  }
  std::printf("thread hand-over floor (two threads bouncing an atomic, yielding): %.1f ns\n",
              handover_floor_ns());
  // What purine simulate's cluster files call wake_cost_us and wake_latency_us: the asleep row
  // less the awake one.
  const HandOver awake = hand_over(FLAGS_idle_spin_us / 5, 101);
  const HandOver asleep = hand_over(std::max(1000, 20 * FLAGS_idle_spin_us), 101);
  std::printf(
      "hand-over to an executor idle %d us (spinning) / %d us (asleep), median of 101: the giver's "
      "next task after %.1f / %.1f us, the receiver's after %.1f / %.1f us; waking costs the giver "
      "%.1f us and the receiver starts %.1f us later\n",
      FLAGS_idle_spin_us / 5, std::max(1000, 20 * FLAGS_idle_spin_us), awake.giver_us,
      asleep.giver_us, awake.receiver_us, asleep.receiver_us, asleep.giver_us - awake.giver_us,
      asleep.receiver_us - awake.receiver_us);
  return 0;
}
