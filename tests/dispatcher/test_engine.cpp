// Engine behaviour on hand-built plans, in both modes: dependencies, executor threads, repeated
// runs, failures, stalls, polled tasks and observers.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "dispatcher/engine.hpp"

namespace pd = purine::dispatch;
using namespace std::chrono_literals;

namespace {

// Appends task names in execution order; thread-safe.
struct Log {
  std::mutex mu;
  std::vector<std::string> names;
  void add(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu);
    names.push_back(name);
  }
  size_t index_of(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu);
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) return i;
    }
    return names.size();
  }
};

// True when `order` is 0, 1, 2, ...: a chain's tasks ran in chain order, each once.
bool is_task_order(const std::vector<int>& order) {
  for (size_t t = 0; t < order.size(); ++t)
    if (order[t] != static_cast<int>(t)) return false;
  return true;
}

pd::TaskId add(pd::Plan& plan, const std::string& name, pd::ExecutorId executor,
               std::function<void()> run) {
  pd::Task task;
  task.name = name;
  task.location = "rank0:cpu";
  task.executor = executor;
  task.run = std::move(run);
  return plan.add_task(std::move(task));
}

pd::EngineOptions options_for(pd::Mode mode) {
  pd::EngineOptions options;
  options.mode = mode;
  return options;
}

}  // namespace

TEST_CASE("Engine runs a diamond in dependency order, again and again", "[engine]") {
  const pd::Mode mode = GENERATE(pd::Mode::kParallel, pd::Mode::kSerial);
  Log log;
  pd::Plan plan;
  plan.add_executor({"cpu/0"});
  plan.add_executor({"cpu/1"});
  const auto a = add(plan, "a", 0, [&] { log.add("a"); });
  const auto b = add(plan, "b", 1, [&] { log.add("b"); });
  const auto c = add(plan, "c", 0, [&] { log.add("c"); });
  const auto d = add(plan, "d", 1, [&] { log.add("d"); });
  plan.add_dependency(a, b);
  plan.add_dependency(a, c);
  plan.add_dependency(b, d);
  plan.add_dependency(c, d);
  pd::Engine engine(std::move(plan), options_for(mode));
  for (int run = 0; run < 5; ++run) {
    log.names.clear();
    engine.run();
    REQUIRE(log.names.size() == 4);
    CHECK(log.index_of("a") == 0);
    CHECK(log.index_of("d") == 3);
  }
  CHECK(engine.plan().tasks().size() == 4);
}

TEST_CASE("Serial mode runs tasks in the deterministic topological order", "[engine]") {
  Log log;
  pd::Plan plan;
  plan.add_executor({"cpu"});
  for (int t = 0; t < 5; ++t)
    add(plan, "t" + std::to_string(t), 0, [&log, t] { log.add("t" + std::to_string(t)); });
  plan.add_dependency(3, 1);
  plan.add_dependency(2, 0);
  pd::Engine engine(std::move(plan), options_for(pd::Mode::kSerial));
  engine.run();
  CHECK(log.names == std::vector<std::string>{"t2", "t0", "t3", "t1", "t4"});
}

TEST_CASE("Each executor runs its tasks on its own thread, set up by on_thread_start", "[engine]") {
  constexpr int kExecutors = 3;
  std::mutex mu;
  std::vector<std::thread::id> started(kExecutors);
  std::vector<std::set<std::thread::id>> ran(kExecutors);
  pd::Plan plan;
  for (int e = 0; e < kExecutors; ++e) {
    pd::ExecutorSpec spec;
    spec.name = "cpu/" + std::to_string(e);
    spec.on_thread_start = [&, e] {
      std::lock_guard<std::mutex> lock(mu);
      started[e] = std::this_thread::get_id();
    };
    plan.add_executor(std::move(spec));
  }
  pd::TaskId previous = -1;
  for (int t = 0; t < 300; ++t) {
    const int e = (t * 7) % kExecutors;
    const auto id = add(plan, "t" + std::to_string(t), e, [&, e] {
      std::lock_guard<std::mutex> lock(mu);
      ran[e].insert(std::this_thread::get_id());
    });
    if (previous >= 0 && t % 3 != 0) plan.add_dependency(previous, id);
    previous = id;
  }
  pd::Engine engine(std::move(plan));
  engine.run();
  engine.run();
  std::set<std::thread::id> distinct;
  for (int e = 0; e < kExecutors; ++e) {
    CHECK(ran[e] == std::set<std::thread::id>{started[e]});
    distinct.insert(started[e]);
  }
  CHECK(distinct.size() == kExecutors);
  CHECK(distinct.count(std::this_thread::get_id()) == 0);
}

TEST_CASE("A long chain alternating between executors keeps its order", "[engine]") {
  constexpr int kTasks = 20000;
  std::vector<int> order;
  order.reserve(kTasks);
  pd::Plan plan;
  plan.add_executor({"cpu/0"});
  plan.add_executor({"cpu/1"});
  for (int t = 0; t < kTasks; ++t) {
    add(plan, "t" + std::to_string(t), (t / 3) % 2, [&order, t] { order.push_back(t); });
    if (t > 0) plan.add_dependency(t - 1, t);
  }
  pd::Engine engine(std::move(plan));
  for (int run = 0; run < 2; ++run) {
    order.clear();
    engine.run();
    REQUIRE(order.size() == kTasks);
    CHECK(is_task_order(order));
  }
}

TEST_CASE("A chain of floating tasks stays on the executor it started on", "[engine]") {
  constexpr int kTasks = 5000;
  std::vector<int> order;
  order.reserve(kTasks);
  std::mutex mu;
  std::set<std::thread::id> threads;
  pd::Plan plan;
  plan.add_executor({"cpu/0"});
  plan.add_executor({"cpu/1"});
  for (int t = 0; t < kTasks; ++t) {
    add(plan, "t" + std::to_string(t), pd::kAnyExecutor, [&, t] {
      order.push_back(t);
      std::lock_guard<std::mutex> lock(mu);
      threads.insert(std::this_thread::get_id());
    });
    if (t > 0) plan.add_dependency(t - 1, t);
  }
  pd::Engine engine(std::move(plan));
  for (int run = 0; run < 3; ++run) {
    order.clear();
    threads.clear();
    engine.run();
    REQUIRE(order.size() == kTasks);
    CHECK(is_task_order(order));
    CHECK(threads.size() == 1);  // no hand-over: each task runs where its predecessor ended
  }
}

TEST_CASE("Floating and pinned tasks mix, a floating task's failure names it", "[engine]") {
  for (pd::Mode mode : {pd::Mode::kParallel, pd::Mode::kSerial}) {
    std::atomic<int> sum{0};
    std::atomic<bool> fail{false};
    pd::Plan plan;
    const pd::ExecutorId main = plan.add_executor({"cpu/main"});
    plan.add_executor({"cpu/other"});
    // A source fans out to 64 floating tasks, which fan in to a pinned sink.
    const pd::TaskId source = add(plan, "source", main, [] {});
    const pd::TaskId sink = add(plan, "sink", main, [&] { sum += 1000; });
    for (int i = 0; i < 64; ++i) {
      const pd::TaskId t = add(plan, "floating" + std::to_string(i), pd::kAnyExecutor, [&, i] {
        if (fail && i == 17) throw std::runtime_error("boom");
        sum += i;
      });
      plan.add_dependency(source, t);
      plan.add_dependency(t, sink);
    }
    pd::Engine engine(std::move(plan), options_for(mode));
    engine.run();
    CHECK(sum == 1000 + 63 * 64 / 2);
    fail = true;
    REQUIRE_THROWS_WITH(engine.run(), Catch::Contains("floating17") && Catch::Contains("boom"));
    fail = false;
    sum = 0;
    engine.run();
    CHECK(sum == 1000 + 63 * 64 / 2);
  }
}

TEST_CASE("Empty plans, idle executors and tasks without a body run", "[engine]") {
  const pd::Mode mode = GENERATE(pd::Mode::kParallel, pd::Mode::kSerial);
  {
    pd::Engine engine(pd::Plan{}, options_for(mode));
    engine.run();
    engine.run();
  }
  pd::Plan plan;
  plan.add_executor({"idle"});
  plan.add_executor({"busy"});
  std::atomic<int> count{0};
  const auto a = add(plan, "a", 1, [&] { ++count; });
  const auto b = add(plan, "sync point", 1, nullptr);
  const auto c = add(plan, "c", 1, [&] { ++count; });
  plan.add_dependency(a, b);
  plan.add_dependency(b, c);
  pd::Engine engine(std::move(plan), options_for(mode));
  engine.run();
  engine.run();
  CHECK(count == 4);
}

TEST_CASE("A cycle is a purine::Error naming tasks on it", "[engine]") {
  const pd::Mode mode = GENERATE(pd::Mode::kParallel, pd::Mode::kSerial);
  pd::Plan plan;
  plan.add_executor({"cpu"});
  const auto x = add(plan, "net::x", 0, [] {});
  const auto fc = add(plan, "net::fc", 0, [] {});
  const auto relu = add(plan, "net::relu", 0, [] {});
  const auto loss = add(plan, "net::loss", 0, [] {});
  plan.add_dependency(x, fc);
  plan.add_dependency(fc, relu);
  plan.add_dependency(relu, fc);
  plan.add_dependency(relu, loss);
  try {
    pd::Engine engine(std::move(plan), options_for(mode));
    FAIL("no cycle error");
  } catch (const purine::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("net::fc -> net::relu -> net::fc"));
  }
}

TEST_CASE("A task's exception is rethrown by sync() with its name, the next run works",
          "[engine]") {
  const pd::Mode mode = GENERATE(pd::Mode::kParallel, pd::Mode::kSerial);
  std::atomic<bool> fail{true};
  std::atomic<int> after{0};
  std::atomic<int> independent{0};
  pd::Plan plan;
  plan.add_executor({"cpu/0"});
  plan.add_executor({"cpu/1"});
  const auto source = add(plan, "source", 0, [] {});
  const auto boom = add(plan, "replica1::conv2", 1, [&] {
    if (fail) throw std::runtime_error("out of memory");
  });
  const auto next = add(plan, "next", 0, [&] { ++after; });
  const auto last = add(plan, "last", 1, [&] { ++after; });
  add(plan, "independent", 0, [&] { ++independent; });
  plan.add_dependency(source, boom);
  plan.add_dependency(boom, next);
  plan.add_dependency(next, last);
  pd::Engine engine(std::move(plan), options_for(mode));
  for (int run = 0; run < 2; ++run) {
    CHECK_THROWS_WITH(engine.run(), "task replica1::conv2: out of memory");
    CHECK(after == 0);
  }
  fail = false;
  engine.run();
  CHECK(after == 2);
  engine.run();
  CHECK(after == 4);
  CHECK(independent >= 2);  // it may or may not have run in the failed runs
}

TEST_CASE("An exception that is not a std::exception still fails the run cleanly", "[engine]") {
  pd::Plan plan;
  plan.add_executor({"cpu"});
  add(plan, "odd", 0, [] { throw 42; });
  pd::Engine engine(std::move(plan));
  CHECK_THROWS_WITH(engine.run(), Catch::StartsWith("task odd: unknown exception"));
}

TEST_CASE("Misuse of the run protocol is a purine::Error", "[engine]") {
  pd::Plan plan;
  plan.add_executor({"cpu"});
  std::atomic<bool> release{false};
  add(plan, "wait", 0, [&] {
    while (!release) std::this_thread::sleep_for(1ms);
  });
  pd::Engine engine(std::move(plan));
  engine.sync();  // no run: nothing to wait for
  engine.run_async();
  CHECK_THROWS_AS(engine.run_async(), purine::Error);
  pd::Observer* none = nullptr;
  CHECK_THROWS_AS(engine.remove_observer(none), purine::Error);
  release = true;
  engine.sync();
}

TEST_CASE("A stall is reported within the timeout, naming the stuck task", "[engine]") {
  std::atomic<bool> release{false};
  pd::Plan plan;
  plan.add_executor({"rank0:cpu/main"});
  plan.add_executor({"rank0:cpu/io"});
  const auto before = add(plan, "before", 0, [] {});
  pd::Task stuck;
  stuck.name = "replica0::allreduce";
  stuck.location = "rank0:gpu1";
  stuck.executor = 1;
  stuck.run = [&] {
    while (!release) std::this_thread::sleep_for(1ms);
  };
  const auto stuck_id = plan.add_task(std::move(stuck));
  const auto waiting = add(plan, "replica0::update", 0, [] {});
  plan.add_dependency(before, stuck_id);
  plan.add_dependency(stuck_id, waiting);
  pd::EngineOptions options;
  options.stall_timeout = 200ms;
  {
    pd::Engine engine(std::move(plan), options);
    engine.run_async();
    const auto start = std::chrono::steady_clock::now();
    std::string what;
    try {
      engine.sync();
    } catch (const purine::Error& e) {
      what = e.what();
    }
    const auto waited = std::chrono::steady_clock::now() - start;
    CHECK(waited >= 200ms);
    CHECK(waited < 3s);
    CHECK_THAT(what, Catch::Contains("stalled"));
    CHECK_THAT(what, Catch::Contains("replica0::allreduce @ rank0:gpu1 on rank0:cpu/io: running"));
    CHECK_THAT(what, Catch::Contains("replica0::update @ rank0:cpu"));
    CHECK_THAT(what, !Catch::Contains("before"));
    CHECK_THROWS_WITH(engine.run_async(), Catch::Contains("stalled"));
    release = true;  // the stuck task returns; the destructor then joins every thread
  }
}

TEST_CASE("Destroying a stalled engine does not wait for a task that never returns", "[engine]") {
  // The flag lives in the task closure: the abandoned thread may outlive this test case.
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto returned = std::make_shared<std::atomic<bool>>(false);
  pd::Plan plan;
  plan.add_executor({"cpu/main"});
  plan.add_executor({"cpu/other"});
  add(plan, "stuck", 0, [release, returned] {
    while (!*release) std::this_thread::sleep_for(1ms);
    *returned = true;
  });
  add(plan, "fine", 1, [] {});
  pd::EngineOptions options;
  options.stall_timeout = 100ms;
  auto engine = std::make_unique<pd::Engine>(std::move(plan), options);
  engine->run_async();
  CHECK_THROWS_WITH(engine->sync(), Catch::Contains("stuck @ rank0:cpu on cpu/main: running"));
  const auto start = std::chrono::steady_clock::now();
  engine.reset();
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  *release = true;  // the detached thread now finishes its task and exits on its own
  for (int i = 0; i < 2000 && !*returned; ++i) std::this_thread::sleep_for(1ms);
  CHECK(*returned);
}

TEST_CASE("The destructor waits for a run that was never synced", "[engine]") {
  std::atomic<int> count{0};
  {
    pd::Plan plan;
    plan.add_executor({"cpu"});
    for (int t = 0; t < 50; ++t) {
      add(plan, "t" + std::to_string(t), 0, [&] {
        std::this_thread::sleep_for(100us);
        ++count;
      });
    }
    pd::Engine engine(std::move(plan));
    engine.run_async();
  }
  CHECK(count == 50);
}

TEST_CASE("A polled task completes only when poll() returns true", "[engine]") {
  const pd::Mode mode = GENERATE(pd::Mode::kParallel, pd::Mode::kSerial);
  constexpr int kPolls = 5;
  std::atomic<int> polls{0};
  std::atomic<int> polls_seen_by_successor{-1};
  std::atomic<int> other{0};
  pd::Plan plan;
  plan.add_executor({"cpu"});
  const pd::ExecutorId mpi = plan.add_executor({"mpi", pd::ExecutorKind::kMpi});
  pd::Task send;
  send.name = "isend";
  send.executor = mpi;
  send.run = [&] { polls = 0; };
  send.poll = [&] { return ++polls >= kPolls; };
  const auto send_id = plan.add_task(std::move(send));
  const auto after = add(plan, "after", 0, [&] { polls_seen_by_successor = polls.load(); });
  plan.add_dependency(send_id, after);
  for (int t = 0; t < 10; ++t) add(plan, "other" + std::to_string(t), mpi, [&] { ++other; });
  pd::Engine engine(std::move(plan), options_for(mode));
  for (int run = 0; run < 3; ++run) {
    engine.run();
    CHECK(polls_seen_by_successor == kPolls);
  }
  CHECK(other == 30);
}

TEST_CASE("Ready sends (Task::run_first) run first, and nothing is polled while one waits",
          "[engine]") {
  // The exchange of two ranks: a receive earlier in the plan than the sends, its sum after it.
  // Unmarked, the LIFO would post the receive first; a poll may then move its whole message
  // (and its sum run) before this rank's sends start, while the peer waits for them.
  Log log;
  pd::Plan plan;
  const pd::ExecutorId comm = plan.add_executor({"comm"});
  const auto polled = [&](const std::string& name, bool run_first) {
    pd::Task task;
    task.name = name;
    task.executor = comm;
    task.run = [&log, name] { log.add("run " + name); };
    task.poll = [&log, name] {
      log.add("poll " + name);
      return true;
    };
    task.run_first = run_first;
    return plan.add_task(std::move(task));
  };
  const auto receive = polled("receive", false);
  const auto sum = add(plan, "sum", comm, [&] { log.add("run sum"); });
  plan.add_dependency(receive, sum);
  polled("send_a", true);
  polled("send_b", true);
  pd::Engine engine(std::move(plan));
  for (int run = 0; run < 3; ++run) {
    log.names.clear();
    engine.run();
    REQUIRE(log.names.size() == 7);
    // Both sends started before anything else, no poll between them.
    CHECK(std::set<std::string>(log.names.begin(), log.names.begin() + 2) ==
          std::set<std::string>{"run send_a", "run send_b"});
    CHECK(log.index_of("run sum") > log.index_of("poll receive"));
  }
}

TEST_CASE("An exception from poll() fails the run, naming the task", "[engine]") {
  const pd::Mode mode = GENERATE(pd::Mode::kParallel, pd::Mode::kSerial);
  pd::Plan plan;
  plan.add_executor({"mpi", pd::ExecutorKind::kMpi});
  pd::Task recv;
  recv.name = "irecv";
  recv.run = [] {};
  recv.poll = []() -> bool { throw std::runtime_error("MPI_ERR_TRUNCATE"); };
  plan.add_task(std::move(recv));
  pd::Engine engine(std::move(plan), options_for(mode));
  CHECK_THROWS_WITH(engine.run(), "task irecv: MPI_ERR_TRUNCATE");
}

TEST_CASE("on_thread_start failing makes the constructor throw", "[engine]") {
  pd::Plan plan;
  pd::ExecutorSpec spec;
  spec.name = "gpu0/compute";
  spec.on_thread_start = [] { throw std::runtime_error("no such device"); };
  plan.add_executor(std::move(spec));
  plan.add_executor({"cpu"});
  CHECK_THROWS_WITH(pd::Engine(std::move(plan)),
                    Catch::Contains("gpu0/compute") && Catch::Contains("no such device"));
}

namespace {

// Records every event; checks that starts and ends pair up per executor.
class RecordingObserver : public pd::Observer {
 public:
  struct Seen {
    std::string task, location, executor_name;
    int executor;
    bool start;
    std::chrono::steady_clock::time_point time;
  };
  void on_task_start(const pd::TaskEvent& e) override { record(e, true); }
  void on_task_end(const pd::TaskEvent& e) override { record(e, false); }
  std::vector<Seen> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 private:
  void record(const pd::TaskEvent& e, bool start) {
    std::lock_guard<std::mutex> lock(mu_);
    seen_.push_back({*e.task_name, *e.location, *e.executor_name, e.executor, start, e.time});
  }
  std::mutex mu_;
  std::vector<Seen> seen_;
};

}  // namespace

TEST_CASE("Observers see the start and end of every task with executor and location", "[engine]") {
  const pd::Mode mode = GENERATE(pd::Mode::kParallel, pd::Mode::kSerial);
  pd::Plan plan;
  plan.add_executor({"cpu/0"});
  plan.add_executor({"cpu/1"});
  constexpr int kTasks = 40;
  for (int t = 0; t < kTasks; ++t) {
    pd::Task task;
    task.name = "t" + std::to_string(t);
    task.location = "rank0:dev" + std::to_string(t % 3);
    task.executor = t % 2;
    task.run = [] {};
    const auto id = plan.add_task(std::move(task));
    if (t >= 2) plan.add_dependency(id - 2, id);
  }
  RecordingObserver observer;
  RecordingObserver removed;
  pd::Engine engine(std::move(plan), options_for(mode));
  engine.add_observer(&observer);
  engine.add_observer(&observer);  // added once
  engine.add_observer(&removed);
  engine.remove_observer(&removed);
  engine.run();
  const auto seen = observer.seen();
  REQUIRE(seen.size() == 2 * kTasks);
  CHECK(removed.seen().empty());
  std::vector<int> starts(kTasks, 0), ends(kTasks, 0);
  std::vector<std::string> open(2);  // per executor: the task started and not yet ended
  for (const auto& s : seen) {
    const int t = std::stoi(s.task.substr(1));
    CHECK(s.executor == t % 2);
    CHECK(s.executor_name == "cpu/" + std::to_string(t % 2));
    CHECK(s.location == "rank0:dev" + std::to_string(t % 3));
    if (s.start) {
      CHECK(open[s.executor].empty());
      open[s.executor] = s.task;
      ++starts[t];
    } else {
      CHECK(open[s.executor] == s.task);
      open[s.executor].clear();
      ++ends[t];
    }
  }
  CHECK(starts == std::vector<int>(kTasks, 1));
  CHECK(ends == std::vector<int>(kTasks, 1));

  engine.remove_observer(&observer);
  engine.run();
  CHECK(observer.seen().size() == 2 * kTasks);
}
