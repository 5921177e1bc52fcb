// The discrete-event simulation of plans (dispatcher/simulator.hpp) on hand-made plans whose
// timelines are known by hand: a chain, a fork and join, two executors, an order edge, a
// resource, two transfers sharing one channel, a collective, a core pool and its time slicing,
// sleeping threads, iterations per group, and the serial engine's order when every cost is equal.
#include <catch2/catch.hpp>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "dispatcher/engine.hpp"
#include "dispatcher/simulator.hpp"

namespace pd = purine::dispatch;

namespace {

pd::TaskId add(pd::Plan& plan, const std::string& name, pd::ExecutorId executor) {
  pd::Task task;
  task.name = name;
  task.location = "rank0:cpu";
  task.executor = executor;
  return plan.add_task(std::move(task));
}

pd::SimulationSetup busy_times(const pd::Plan& plan, std::vector<double> busy) {
  pd::SimulationSetup setup;
  for (double b : busy) {
    pd::SimulatedCost c;
    c.busy = b;
    setup.costs.push_back(c);
  }
  REQUIRE(setup.costs.size() == plan.tasks().size());
  return setup;
}

// Both executors of `setup` in one pool of 2 cores whose idle threads sleep after 0.5 s; waking
// one costs its waker 0.25 s and starts its task 2 s late.
void with_sleeping_threads(pd::SimulationSetup& setup) {
  setup.executor_pool = {0, 0};
  setup.pool_cores = {2};
  setup.pool_wake_cost = {0.25};
  setup.pool_wake_latency = {2};
  setup.idle_spin = 0.5;
}

}  // namespace

TEST_CASE("simulate: a chain runs back to back", "[simulator]") {
  pd::Plan plan;
  const auto e = plan.add_executor({"rank0:cpu/main"});
  const auto a = add(plan, "a", e), b = add(plan, "b", e), c = add(plan, "c", e);
  plan.add_dependency(a, b);
  plan.add_dependency(b, c);
  const pd::Simulation sim = pd::simulate(plan, busy_times(plan, {1, 2, 3}));
  CHECK(sim.at(a).start == 0);
  CHECK(sim.at(a).end == 1);
  CHECK(sim.at(b).start == 1);
  CHECK(sim.at(c).start == 3);
  CHECK(sim.at(c).end == 6);
  CHECK(sim.makespan == 6);
  CHECK(sim.executor_busy[e] == 6);
}

TEST_CASE("simulate: fork and join over two executors", "[simulator]") {
  pd::Plan plan;
  const auto main = plan.add_executor({"main"}), side = plan.add_executor({"side"});
  const auto src = add(plan, "src", main), left = add(plan, "left", main),
             right = add(plan, "right", side), join = add(plan, "join", main);
  plan.add_dependency(src, left);
  plan.add_dependency(src, right);
  plan.add_dependency(left, join);
  plan.add_dependency(right, join);
  const pd::Simulation sim = pd::simulate(plan, busy_times(plan, {1, 2, 5, 1}));
  CHECK(sim.at(left).start == 1);
  CHECK(sim.at(right).start == 1);  // in parallel, on its own executor
  CHECK(sim.at(left).end == 3);
  CHECK(sim.at(join).start == 6);  // waits for the longer branch
  CHECK(sim.makespan == 7);
}

TEST_CASE("simulate: one executor runs its ready tasks in the plan's topological order",
          "[simulator]") {
  pd::Plan plan;
  const auto e = plan.add_executor({"main"});
  const auto src = add(plan, "src", e), x = add(plan, "x", e), y = add(plan, "y", e);
  plan.add_dependency(src, y);
  plan.add_dependency(src, x);
  const pd::Simulation sim = pd::simulate(plan, busy_times(plan, {1, 1, 1}));
  CHECK(sim.at(x).start == 1);  // the smaller task id first, as the serial engine
  CHECK(sim.at(y).start == 2);
}

TEST_CASE("simulate: a ready send (Task::run_first) goes before earlier ready tasks",
          "[simulator]") {
  const bool run_first = GENERATE(false, true);
  pd::Plan plan;
  const auto e = plan.add_executor({"main"});
  const auto src = add(plan, "src", e), x = add(plan, "x", e);
  pd::Task send_task;
  send_task.name = "send";
  send_task.executor = e;
  send_task.run_first = run_first;
  const auto send = plan.add_task(send_task);
  plan.add_dependency(src, x);
  plan.add_dependency(src, send);
  pd::SimulationSetup setup = busy_times(plan, {1, 1, 1});
  setup.iterations = 2;
  const pd::Simulation sim = pd::simulate(plan, setup);
  for (int iteration = 0; iteration < 2; ++iteration) {
    CHECK(sim.at(run_first ? send : x, iteration).start == 3 * iteration + 1);
    CHECK(sim.at(run_first ? x : send, iteration).start == 3 * iteration + 2);
  }
}

TEST_CASE("simulate: an order edge delays a task on another executor", "[simulator]") {
  pd::Plan plan;
  const auto e0 = plan.add_executor({"a"}), e1 = plan.add_executor({"b"});
  const auto first = add(plan, "first", e0), second = add(plan, "second", e1);
  plan.add_dependency(first, second);  // as Graph::add_order compiles
  const pd::Simulation sim = pd::simulate(plan, busy_times(plan, {4, 1}));
  CHECK(sim.at(second).start == 4);
  CHECK(sim.at(second).end == 5);
}

TEST_CASE("simulate: users of a resource never overlap and keep the topological order",
          "[simulator]") {
  pd::Plan plan;
  const auto e0 = plan.add_executor({"a"}), e1 = plan.add_executor({"b"});
  const auto u0 = add(plan, "u0", e0), u1 = add(plan, "u1", e1);
  const auto rng = plan.add_resource("rng");
  plan.use_resource(u1, rng);
  plan.use_resource(u0, rng);
  const pd::Simulation sim = pd::simulate(plan, busy_times(plan, {2, 3}));
  CHECK(sim.at(u0).start == 0);
  CHECK(sim.at(u1).start == 2);
  CHECK(sim.makespan == 5);
}

TEST_CASE("simulate: two transfers sharing one channel go one after the other", "[simulator]") {
  pd::Plan plan;
  const auto e0 = plan.add_executor({"a"}), e1 = plan.add_executor({"b"});
  const auto s0 = add(plan, "send0", e0), s1 = add(plan, "send1", e1);
  const auto after0 = add(plan, "after0", e0);
  pd::SimulationSetup setup = busy_times(plan, {1, 1, 1});
  setup.channels = 1;
  for (auto s : {s0, s1}) {
    setup.costs[s].latency = 0.5;
    setup.costs[s].transfer = 2;
    setup.costs[s].channels = {0};
  }
  const pd::Simulation sim = pd::simulate(plan, setup);
  CHECK(sim.at(s0).busy_end == 1);
  CHECK(sim.at(s0).transfer_start == 1);
  CHECK(sim.at(s0).end == 3.5);
  CHECK(sim.at(s1).transfer_start ==
        3);  // the channel was taken for send0's bytes, not its latency
  CHECK(sim.at(s1).end == 5.5);
  CHECK(sim.at(after0).start == 1);  // the executor did not wait for the transfer
  CHECK(sim.channel_busy[0] == 4);
}

TEST_CASE(
    "simulate: a transfer takes its route's channels in turn, so a busy one holds back none before "
    "it",
    "[simulator]") {
  // Channel 0 is a sender's NIC, 1 and 2 two receivers' NICs. Arrivals at 1, 2, 3, 4: send0
  // takes receiver 1 until 11. send1 (0 then 1) streams out at 2 and waits at 1 until 11;
  // send2 (0 then 2) waits behind send1's bytes on 0 until 12, not for channel 1, which it does
  // not use; send3 takes receiver 2 at 4 until 14, so send2 reaches it at 12 and waits until 14.
  pd::Plan plan;
  std::vector<pd::TaskId> sends;
  for (int i = 0; i < 4; ++i)
    sends.push_back(add(plan, "send" + std::to_string(i), plan.add_executor({"e"})));
  pd::SimulationSetup setup = busy_times(plan, {1, 2, 3, 4});
  setup.channels = 3;
  const std::vector<std::vector<int>> routes{{1}, {0, 1}, {0, 2}, {2}};
  for (int i = 0; i < 4; ++i) {
    setup.costs[sends[i]].latency = 1;
    setup.costs[sends[i]].transfer = 10;
    setup.costs[sends[i]].channels = routes[i];
  }
  const pd::Simulation sim = pd::simulate(plan, setup);
  CHECK(sim.at(sends[0]).end == 12);
  CHECK(sim.at(sends[1]).transfer_start == 2);
  CHECK(sim.channel_start(sends[1], 0, 1) == 11);  // channel 1 freed at 11: latency takes none
  CHECK(sim.at(sends[1]).end == 22);
  CHECK(sim.at(sends[2]).transfer_start == 12);
  CHECK(sim.channel_start(sends[2], 0, 1) == 14);
  CHECK(sim.at(sends[2]).end == 25);
  CHECK(sim.at(sends[3]).transfer_start == 4);
  CHECK(sim.at(sends[3]).end == 15);
  CHECK(sim.channel_busy == std::vector<double>{20, 20, 20});
}

TEST_CASE("simulate: a 2-stage 1F1B pipeline of 2 micro-batches has the bubble of theory",
          "[simulator]") {
  pd::Plan plan;
  const auto s0 = plan.add_executor({"rank0:cpu/main"}),
             s1 = plan.add_executor({"rank0:cpu1/main"});
  pd::TaskId f[2][2], b[2][2];  // [stage][micro-batch]
  for (int m = 0; m < 2; ++m)
    for (int s = 0; s < 2; ++s) {
      f[s][m] = add(plan, "F" + std::to_string(s) + "." + std::to_string(m), s ? s1 : s0);
      b[s][m] = add(plan, "B" + std::to_string(s) + "." + std::to_string(m), s ? s1 : s0);
    }
  for (int m = 0; m < 2; ++m) {
    plan.add_dependency(f[0][m], f[1][m]);  // the activations go forward
    plan.add_dependency(f[1][m], b[1][m]);
    plan.add_dependency(b[1][m], b[0][m]);  // the gradients come back
  }
  // 1F1B's orders (graphs/pipeline.hpp): stage 0 F0 F1 B0 B1, stage 1 F0 B0 F1 B1.
  plan.add_dependency(f[0][1], b[0][0]);
  plan.add_dependency(b[1][0], f[1][1]);
  pd::SimulationSetup setup;
  setup.costs.assign(plan.tasks().size(), {});
  for (int s = 0; s < 2; ++s)
    for (int m = 0; m < 2; ++m) {
      setup.costs[f[s][m]].busy = 1;
      setup.costs[b[s][m]].busy = 2;
    }
  const pd::Simulation sim = pd::simulate(plan, setup);
  CHECK(sim.at(f[0][1]).start == 1);
  CHECK(sim.at(f[1][0]).start == 1);
  CHECK(sim.at(b[1][0]).start == 2);
  CHECK(sim.at(f[1][1]).start == 4);  // after its stage's first backward, though ready at 2
  CHECK(sim.at(b[0][0]).start == 4);
  CHECK(sim.at(b[1][1]).start == 5);
  CHECK(sim.at(b[0][1]).start == 7);
  CHECK(sim.makespan == 9);
  // Each stage works 6 of 9: the bubble (S - 1) / (M + S - 1) = 1/3.
  CHECK(1 - sim.executor_busy[s0] / sim.makespan == Approx(1.0 / 3));
}

TEST_CASE("simulate: a copy holding its in-order queue keeps the executor busy", "[simulator]") {
  pd::Plan plan;
  const auto stream = plan.add_executor({"gpu/main"});
  const auto copy = add(plan, "copy", stream), next = add(plan, "next", stream);
  pd::SimulationSetup setup = busy_times(plan, {0, 1});
  setup.costs[copy].transfer = 3;
  setup.costs[copy].hold_executor = true;
  const pd::Simulation sim = pd::simulate(plan, setup);
  CHECK(sim.at(copy).end == 3);
  CHECK(sim.at(next).start == 3);
}

TEST_CASE("simulate: a collective completes when its last member arrives", "[simulator]") {
  pd::Plan plan;
  const auto e0 = plan.add_executor({"rank0"}), e1 = plan.add_executor({"rank1"});
  const auto w0 = add(plan, "work0", e0), w1 = add(plan, "work1", e1);
  const auto r0 = add(plan, "allreduce0", e0), r1 = add(plan, "allreduce1", e1);
  plan.add_dependency(w0, r0);
  plan.add_dependency(w1, r1);
  pd::SimulationSetup setup = busy_times(plan, {1, 4, 0.5, 0.5});
  for (auto r : {r0, r1}) {
    setup.costs[r].collective = 7;
    setup.costs[r].transfer = 2;
  }
  const pd::Simulation sim = pd::simulate(plan, setup);
  CHECK(sim.at(r0).busy_end == 1.5);
  CHECK(sim.at(r0).end == 6.5);  // rank 1 arrives at 4.5, then 2 s
  CHECK(sim.at(r1).end == 6.5);
}

TEST_CASE("simulate: a polled collective advances only between its executor's tasks",
          "[simulator]") {
  pd::Plan plan;
  const auto e0 = plan.add_executor({"rank0"}), e1 = plan.add_executor({"rank1"});
  const auto r0 = add(plan, "allreduce0", e0), r1 = add(plan, "allreduce1", e1);
  const auto long0 = add(plan, "long0", e0);
  pd::SimulationSetup setup = busy_times(plan, {1, 1, 10});
  for (auto r : {r0, r1}) {
    setup.costs[r].collective = 0;
    setup.costs[r].transfer = 2;
    setup.costs[r].poll_rounds = 2;
  }
  const pd::Simulation sim = pd::simulate(plan, setup);
  // Both arrive at 1; rank 0 then runs long0 (1..11), so its rounds wait for polls: round one
  // starts at 1 (its executor is free then), ends at 2, is noticed at 11; round two 11..12.
  CHECK(sim.at(long0).start == 1);
  CHECK(sim.at(r0).end == 12);
  CHECK(sim.at(r1).end == 3);  // rank 1's executor is idle: rounds back to back
}

TEST_CASE("simulate: a poll waits for a time slice while the pool's cores are busy",
          "[simulator]") {
  pd::Plan plan;
  const auto comm = plan.add_executor({"comm"}), a = plan.add_executor({"a"}),
             b = plan.add_executor({"b"});
  const auto reduce = add(plan, "allreduce", comm);
  add(plan, "work_a", a);
  const auto work_b = add(plan, "work_b", b);
  pd::SimulationSetup setup = busy_times(plan, {0, 10, 10});
  setup.costs[reduce].collective = 0;
  setup.costs[reduce].transfer = 1;
  setup.costs[reduce].poll_rounds = 1;
  setup.executor_pool = {0, 0, 0};
  setup.pool_cores = {2};
  CHECK(pd::simulate(plan, setup).at(reduce).end == 1);  // polls at once
  setup.pool_poll_delay = {2};
  const pd::Simulation sim = pd::simulate(plan, setup);
  CHECK(sim.at(work_b).start == 0);  // the reduce's busy part took no time
  // Its round starts at 0 (polls come before work_b takes the freed core) and ends at 1, when
  // both cores are busy until 10: the completion is polled a time slice later, at 3.
  CHECK(sim.at(reduce).end == 3);
}

TEST_CASE("simulate: with time slicing a polled transfer shares the pool's cores", "[simulator]") {
  pd::Plan plan;
  const auto comm = plan.add_executor({"comm"}), main = plan.add_executor({"main"});
  const auto reduce = add(plan, "allreduce", comm);
  const auto work = add(plan, "work", main);
  pd::SimulationSetup setup = busy_times(plan, {0, 10});
  setup.costs[reduce].transfer = 4;
  setup.costs[reduce].poll_rounds = 1;
  setup.executor_pool = {0, 0};
  setup.pool_cores = {1};
  pd::Simulation sim = pd::simulate(plan, setup);
  CHECK(sim.at(reduce).end == 4);  // beside the core's busy task
  CHECK(sim.at(work).end == 10);
  // Its round is work of the polling thread: with the busy task, two on one core, each at half
  // speed until the round's 4 s are done at 8; the busy task's last 6 s then run alone.
  setup.pool_time_slicing = {true};
  sim = pd::simulate(plan, setup);
  CHECK(sim.at(reduce).end == Approx(8));
  CHECK(sim.at(work).busy_end == Approx(14));
  CHECK(sim.at(work).end == Approx(14));
  // Two cores: nobody shares.
  setup.pool_cores = {2};
  sim = pd::simulate(plan, setup);
  CHECK(sim.at(reduce).end == 4);
  CHECK(sim.at(work).end == 10);
}

TEST_CASE("simulate: executors sharing one core take turns", "[simulator]") {
  pd::Plan plan;
  const auto e0 = plan.add_executor({"main"}), e1 = plan.add_executor({"data"});
  const auto a = add(plan, "a", e0), b = add(plan, "b", e1);
  pd::SimulationSetup setup = busy_times(plan, {2, 3});
  setup.executor_pool = {0, 0};
  setup.pool_cores = {1};
  const pd::Simulation sim = pd::simulate(plan, setup);
  CHECK(sim.at(a).start == 0);
  CHECK(sim.at(b).start == 2);
  CHECK(sim.makespan == 5);
  setup.pool_cores = {2};
  CHECK(pd::simulate(plan, setup).makespan == 3);
}

TEST_CASE("simulate: handing a task to a sleeping executor costs both threads", "[simulator]") {
  // a (3 s on e0) makes b ready on e1, idle since 0, and c on e0. Idle past the spin, e1 sleeps:
  // b starts the wake latency late, and e0, which wakes it, starts c the wake cost late.
  pd::Plan plan;
  const auto e0 = plan.add_executor({"main"}), e1 = plan.add_executor({"side"});
  const auto a = add(plan, "a", e0), b = add(plan, "b", e1), c = add(plan, "c", e0);
  plan.add_dependency(a, b);
  plan.add_dependency(a, c);
  pd::SimulationSetup setup = busy_times(plan, {3, 1, 1});
  with_sleeping_threads(setup);
  pd::Simulation sim = pd::simulate(plan, setup);
  CHECK(sim.at(b).start == 5);
  CHECK(sim.at(c).start == 3.25);
  CHECK(sim.makespan == 6);
  CHECK(sim.executor_busy[e0] == 4);  // waking is not work

  // The gap between iterations includes waking the executors: each iteration starts awake.
  setup.iterations = 2;
  setup.iteration_gap = 1;
  sim = pd::simulate(plan, setup);
  CHECK(sim.at(a, 1).start == 7);
  CHECK(sim.at(b, 1).start == 12);
  CHECK(sim.at(c, 1).start == 10.25);
  setup.iterations = 1;

  setup.idle_spin = 4;  // e1 still spinning at 3: a hand-over costs nothing
  sim = pd::simulate(plan, setup);
  CHECK(sim.at(b).start == 3);
  CHECK(sim.at(c).start == 3);

  setup.idle_spin = 0.5;
  setup.pool_wake_cost.clear();  // pools without wake costs: nobody sleeps
  setup.pool_wake_latency.clear();
  sim = pd::simulate(plan, setup);
  CHECK(sim.at(b).start == 3);
  CHECK(sim.at(c).start == 3);
}

TEST_CASE("simulate: a thread with a transfer in flight polls it and does not sleep",
          "[simulator]") {
  // e1 sends (busy 0.5, then 3 s on the wire) and waits; a, 2 s on e0, then hands it b.
  pd::Plan plan;
  const auto e0 = plan.add_executor({"main"}), e1 = plan.add_executor({"comm"});
  const auto send = add(plan, "send", e1), a = add(plan, "a", e0), b = add(plan, "b", e1);
  plan.add_dependency(a, b);
  pd::SimulationSetup setup = busy_times(plan, {0.5, 2, 1});
  setup.costs[send].transfer = 3;
  with_sleeping_threads(setup);
  pd::Simulation sim = pd::simulate(plan, setup);
  CHECK(sim.at(b).start == 2);  // e1 still polls its send, in flight until 3.5
  CHECK(sim.at(send).end == 3.5);

  setup.costs[send].transfer = 1;  // done at 1.5: e1 sleeps from 2 on, just past its spin
  setup.costs[a].busy = 2.25;
  sim = pd::simulate(plan, setup);
  CHECK(sim.at(b).start == 4.25);
}

TEST_CASE("simulate: each group starts its next iteration once its own tasks are done",
          "[simulator]") {
  pd::Plan plan;
  const auto r0 = plan.add_executor({"rank0:cpu/main"}), r1 = plan.add_executor({"rank1:cpu/main"});
  const auto send = add(plan, "send", r0), recv = add(plan, "receive", r1),
             tail = add(plan, "tail", r1);
  plan.add_dependency(send, recv);
  plan.add_dependency(recv, tail);
  pd::SimulationSetup setup = busy_times(plan, {1, 0, 2});
  setup.executor_group = {0, 1};
  setup.iterations = 3;
  setup.iteration_gap = 0.25;
  const pd::Simulation sim = pd::simulate(plan, setup);
  // Rank 0 is done after its send, rank 1 after its tail: rank 0 runs ahead by an iteration
  // at most, each of its sends waiting only for its own previous iteration.
  CHECK(sim.at(send, 1).start == 1.25);
  CHECK(sim.iteration_end[1][0] == 3);
  CHECK(sim.at(recv, 1).start == 3.25);  // rank 1's gate, after its own iteration 0
  CHECK(sim.at(tail, 2).end == Approx(3 * 2 + 1 + 2 * 0.25));
  CHECK(sim.makespan == Approx(7.5));
}

TEST_CASE("simulate: with equal costs on one executor the order is the serial engine's",
          "[simulator]") {
  std::mt19937 gen(24);
  for (int round = 0; round < 20; ++round) {
    pd::Plan plan;
    const auto e = plan.add_executor({"main"});
    std::vector<std::string> ran;
    const int n = 40;
    for (int t = 0; t < n; ++t) {
      pd::Task task;
      task.name = "t" + std::to_string(t);
      task.executor = e;
      task.run = [&ran, name = task.name] { ran.push_back(name); };
      plan.add_task(std::move(task));
    }
    // Random edges in both directions of the id order, kept acyclic by a random permutation.
    std::vector<int> rank(n);
    for (int t = 0; t < n; ++t) rank[t] = t;
    std::shuffle(rank.begin(), rank.end(), gen);
    std::uniform_int_distribution<int> pick(0, n - 1);
    for (int k = 0; k < 60; ++k) {
      const int a = pick(gen), b = pick(gen);
      if (rank[a] < rank[b]) plan.add_dependency(a, b);
    }
    pd::SimulationSetup setup;
    setup.costs.assign(n, {});
    for (auto& c : setup.costs) c.busy = 1;
    const pd::Simulation sim = pd::simulate(plan, setup);
    std::vector<std::string> simulated(n);
    for (int t = 0; t < n; ++t)
      simulated[static_cast<int>(sim.at(t).start)] = "t" + std::to_string(t);
    pd::EngineOptions serial;
    serial.mode = pd::Mode::kSerial;
    pd::Engine engine(std::move(plan), serial);
    engine.run();
    REQUIRE(simulated == ran);
  }
}

TEST_CASE("simulate: refuses floating tasks, wrong cost counts, negative times and looping routes",
          "[simulator]") {
  pd::Plan plan;
  const auto e = plan.add_executor({"main"});
  add(plan, "a", e);
  pd::SimulationSetup setup;
  CHECK_THROWS_WITH(pd::simulate(plan, setup), Catch::Contains("0 costs for a plan of 1 tasks"));
  setup.costs.assign(1, {});
  setup.costs[0].busy = -1;
  CHECK_THROWS_WITH(pd::simulate(plan, setup), Catch::Contains("task a: its busy time"));
  setup.costs[0].busy = 1;
  setup.costs[0].channels = {3};
  CHECK_THROWS_WITH(pd::simulate(plan, setup), Catch::Contains("uses channel 3"));
  setup.channels = 2;
  setup.costs[0].channels = {1, 0, 1};
  CHECK_THROWS_WITH(pd::simulate(plan, setup), Catch::Contains("route passes channel 1 twice"));
  pd::Plan floating;
  floating.add_executor({"main"});
  add(floating, "f", pd::kAnyExecutor);
  setup.costs[0].channels = {};
  CHECK_THROWS_WITH(pd::simulate(floating, setup), Catch::Contains("task f floats"));
  pd::Plan cycle;
  const auto c = cycle.add_executor({"main"});
  const auto x = add(cycle, "x", c), y = add(cycle, "y", c);
  cycle.add_dependency(x, y);
  cycle.add_dependency(y, x);
  setup.costs.assign(2, {});
  CHECK_THROWS_WITH(pd::simulate(cycle, setup), Catch::Contains("dependency cycle"));
}

TEST_CASE("simulate: the timeline is written in the tracer's Chrome-trace format", "[simulator]") {
  pd::Plan plan;
  const auto e = plan.add_executor({"rank0:cpu/main"});
  const auto send = add(plan, "send", e);
  pd::SimulationSetup setup = busy_times(plan, {0.001});
  setup.channels = 1;
  setup.costs[send].transfer = 0.002;
  setup.costs[send].latency = 0.0005;
  setup.costs[send].channels = {0};
  const pd::Simulation sim = pd::simulate(plan, setup);
  const std::string path = "simulated_trace_test.json";
  pd::write_simulation_trace(plan, setup, sim, {"node0:nic"}, path);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str().find("\"traceEvents\"") != std::string::npos);
  CHECK(text.str().find("\"name\":\"send\",\"ts\":0.000,\"dur\":1000.000") != std::string::npos);
  CHECK(text.str().find("node0:nic") != std::string::npos);
  // The link is busy for the bytes; the latency after them takes none of it.
  CHECK(text.str().find("\"ts\":1000.000,\"dur\":2000.000") != std::string::npos);
  std::remove(path.c_str());
}
