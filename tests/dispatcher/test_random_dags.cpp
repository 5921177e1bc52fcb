// The parallel engine against the serial one on thousands of random read/write DAGs (after
// apache/mxnet's threaded_engine_test). Tasks read and write slots of a shared array, each write
// depending on everything the task read, so a missed or late dependency changes the result; some
// tasks draw from a shared std::mt19937 declared as a resource; some complete only after a few
// polls and write their slots in the last one; with device queues, some tasks only put their
// work on an emulated device queue (dispatcher/emulated_queue.hpp), which runs it later on its own
// thread, ordered by events. The parallel result must equal the serial one bit for bit, run after
// run.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "dispatcher/emulated_queue.hpp"
#include "dispatcher/engine.hpp"

namespace pd = purine::dispatch;

namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// What the tasks share; reset before every run.
struct World {
  std::vector<uint64_t> slots;
  std::mt19937 rng;
  std::vector<uint64_t> initial;
  uint32_t seed = 0;
  void reset() {
    slots = initial;
    rng.seed(seed);
  }
  std::vector<uint64_t> result() {
    std::vector<uint64_t> r = slots;
    r.push_back(rng());  // also checks how many numbers were drawn
    return r;
  }
};

struct LogicalTask {
  std::vector<int> reads, writes;
  bool draws = false;
  int polls = 0;  // > 0: completes after that many polls, writing in the last one
  int executor = 0;
};

struct PolledState {
  uint64_t hash = 0;
  int left = 0;
};

std::function<void()> make_run(World* world, const LogicalTask& task, uint64_t salt,
                               std::shared_ptr<PolledState> polled) {
  return [world, reads = task.reads, writes = task.writes, draws = task.draws, polls = task.polls,
          salt, polled] {
    uint64_t h = mix(salt);
    for (int r : reads) h = mix(h ^ world->slots[r]);
    if (draws) h = mix(h ^ world->rng());
    if (polls > 0) {
      polled->hash = h;
      polled->left = polls;
      return;
    }
    for (int w : writes) world->slots[w] = mix(h + static_cast<uint64_t>(w));
  };
}

std::function<bool()> make_poll(World* world, const LogicalTask& task,
                                std::shared_ptr<PolledState> polled) {
  return [world, writes = task.writes, polled] {
    if (--polled->left > 0) return false;
    for (int w : writes) world->slots[w] = mix(polled->hash + static_cast<uint64_t>(w));
    return true;
  };
}

// A random DAG: dependencies follow from the read/write sets in a random program order; plan ids
// are a random permutation of that order so that edges point both ways in id space. With
// `device_queues`, 1-3 more executors drive emulated device queues (some with a delay per task).
pd::Plan random_plan(std::mt19937& gen, World* world, bool device_queues = false) {
  auto uniform = [&gen](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); };
  const int n = uniform(10, 200);
  const int num_slots = uniform(4, 48);
  const int num_executors = uniform(1, 4);
  const int num_queues = device_queues ? uniform(1, 3) : 0;
  const bool with_rng = uniform(0, 3) != 0;

  std::vector<LogicalTask> tasks(n);
  for (LogicalTask& t : tasks) {
    const int reads = uniform(0, 3), writes = uniform(1, 2);
    for (int i = 0; i < reads; ++i) t.reads.push_back(uniform(0, num_slots - 1));
    for (int i = 0; i < writes; ++i) t.writes.push_back(uniform(0, num_slots - 1));
    std::sort(t.writes.begin(), t.writes.end());
    t.writes.erase(std::unique(t.writes.begin(), t.writes.end()), t.writes.end());
    t.draws = with_rng && uniform(0, 4) == 0;
    t.polls = uniform(0, 9) == 0 ? uniform(1, 4) : 0;
    // -1 is kAnyExecutor: the dispatcher places the task on a kCpuThread executor (all but
    // the last one, a kMpi executor).
    t.executor = uniform(num_executors > 1 ? -1 : 0, num_executors - 1);
    // Executors num_executors.. drive device queues: their tasks are never polled.
    if (num_queues > 0 && uniform(0, 1) == 0) {
      t.executor = num_executors + uniform(0, num_queues - 1);
      t.polls = 0;
    }
  }

  std::vector<int> id_of(n);
  std::iota(id_of.begin(), id_of.end(), 0);
  std::shuffle(id_of.begin(), id_of.end(), gen);
  std::vector<int> logical_of(n);
  for (int i = 0; i < n; ++i) logical_of[id_of[i]] = i;

  pd::Plan plan;
  for (int e = 0; e < num_executors; ++e) {
    plan.add_executor({"exec" + std::to_string(e), e == num_executors - 1
                                                       ? pd::ExecutorKind::kMpi
                                                       : pd::ExecutorKind::kCpuThread});
  }
  std::vector<std::shared_ptr<pd::EmulatedQueue>> queues;
  for (int q = 0; q < num_queues; ++q) {
    queues.push_back(std::make_shared<pd::EmulatedQueue>(
        "queue" + std::to_string(q), std::chrono::microseconds(uniform(0, 1) * 20)));
    plan.add_executor({"device" + std::to_string(q), queues.back()});
  }
  for (int id = 0; id < n; ++id) {
    const LogicalTask& t = tasks[logical_of[id]];
    auto polled = std::make_shared<PolledState>();
    pd::Task task;
    task.name = "task" + std::to_string(logical_of[id]);
    task.location = "rank0:cpu";
    task.executor = t.executor;
    task.run = make_run(world, t, static_cast<uint64_t>(logical_of[id]) * 1000003u, polled);
    if (t.executor >= num_executors) {
      // The task only puts its work on the queue; the queue's thread runs it later.
      task.run = [queue = queues[t.executor - num_executors], work = std::move(task.run)] {
        queue->enqueue(work);
      };
    }
    if (t.polls > 0) task.poll = make_poll(world, t, polled);
    CHECK(plan.add_task(std::move(task)) == id);
  }

  std::vector<int> last_writer(num_slots, -1);
  std::vector<std::vector<int>> readers(num_slots);
  for (int i = 0; i < n; ++i) {
    auto depend = [&](int before) {
      if (before >= 0 && before != i) plan.add_dependency(id_of[before], id_of[i]);
    };
    for (int r : tasks[i].reads) depend(last_writer[r]);
    for (int w : tasks[i].writes) {
      depend(last_writer[w]);
      for (int reader : readers[w]) depend(reader);
    }
    for (int r : tasks[i].reads) readers[r].push_back(i);
    for (int w : tasks[i].writes) {
      last_writer[w] = i;
      readers[w].clear();
    }
  }
  if (with_rng) {
    const pd::ResourceId rng = plan.add_resource("rng");
    for (int i = 0; i < n; ++i) {
      if (tasks[i].draws) plan.use_resource(id_of[i], rng);
    }
  }

  world->initial.resize(num_slots);
  for (uint64_t& v : world->initial) v = gen();
  world->seed = static_cast<uint32_t>(gen());
  return plan;
}

// Runs `dags` random DAGs serially and twice in parallel; returns how many differed.
int dags_differing_from_serial(int dags, uint32_t seed, bool device_queues) {
  std::mt19937 gen(seed);
  int dags_with_differences = 0;
  for (int dag = 0; dag < dags; ++dag) {
    World world;
    pd::Plan plan = random_plan(gen, &world, device_queues);
    const pd::Plan copy = plan;

    pd::EngineOptions serial_options;
    serial_options.mode = pd::Mode::kSerial;
    pd::Engine serial(copy, serial_options);
    world.reset();
    serial.run();
    const std::vector<uint64_t> expected = world.result();

    pd::EngineOptions parallel_options;
    parallel_options.idle_spin = std::chrono::microseconds(dag % 2 == 0 ? 0 : 20);
    pd::Engine parallel(std::move(plan), parallel_options);
    for (int run = 0; run < 2; ++run) {
      world.reset();
      parallel.run();
      if (world.result() != expected) {
        ++dags_with_differences;
        UNSCOPED_INFO("dag " << dag << " run " << run << " differs from the serial run");
      }
    }
  }
  return dags_with_differences;
}

}  // namespace

TEST_CASE("Parallel runs of random DAGs equal the serial run bit for bit", "[engine][random]") {
  CHECK(dags_differing_from_serial(2000, 20150414, /*device_queues=*/false) == 0);
}

TEST_CASE("Random DAGs with tasks on emulated device queues equal the serial run bit for bit",
          "[engine][random][device]") {
  // Device tasks launch as soon as their inputs are issued, waiting on other queues' events;
  // host tasks wait until the events are done. A missed wait or a too-early release shows as a
  // different result.
  CHECK(dags_differing_from_serial(500, 20241123, /*device_queues=*/true) == 0);
}

TEST_CASE("Random DAG results do not depend on the number of executors", "[engine][random]") {
  // Same logical DAG, re-assigned to 1..4 executors: the resource order is the topological
  // order of the plan, which does not involve executors.
  for (int seed = 0; seed < 50; ++seed) {
    std::vector<uint64_t> first;
    for (int executors = 1; executors <= 4; ++executors) {
      std::mt19937 gen(seed);
      World world;
      pd::Plan base = random_plan(gen, &world);
      pd::Plan plan;
      for (int e = 0; e < executors; ++e) plan.add_executor({"exec" + std::to_string(e)});
      for (size_t t = 0; t < base.tasks().size(); ++t) {
        pd::Task task = base.tasks()[t];
        task.executor = static_cast<int>(t) % executors;
        plan.add_task(std::move(task));
      }
      for (size_t t = 0; t < base.successors().size(); ++t) {
        for (pd::TaskId next : base.successors()[t]) plan.add_dependency(t, next);
      }
      for (size_t r = 0; r < base.resources().size(); ++r) {
        const pd::ResourceId id = plan.add_resource(base.resources()[r]);
        for (pd::TaskId user : base.resource_users()[r]) plan.use_resource(user, id);
      }
      pd::Engine engine(std::move(plan));
      world.reset();
      engine.run();
      if (executors == 1) {
        first = world.result();
      } else {
        CHECK(world.result() == first);
      }
    }
  }
}
