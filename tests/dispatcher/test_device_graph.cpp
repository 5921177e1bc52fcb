// Device graphs (dispatcher/device_graph.hpp) on emulated queues: which tasks a recording can
// hold, the condensed plan an engine runs, recording that runs nothing, replays that redo the
// recorded work in order across queues, launch words made anew for each launch, and recordings
// that fail cleanly.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "dispatcher/device_graph.hpp"
#include "dispatcher/emulated_queue.hpp"
#include "dispatcher/engine.hpp"

namespace pd = purine::dispatch;
using namespace std::chrono_literals;

namespace {

// What ran, in order; thread-safe.
struct Log {
  std::mutex mu;
  std::vector<std::string> entries;
  void add(const std::string& entry) {
    std::lock_guard<std::mutex> lock(mu);
    entries.push_back(entry);
  }
  std::vector<std::string> take() {
    std::lock_guard<std::mutex> lock(mu);
    return std::move(entries);
  }
};

// host_source -> a_after_host (queue a); a_source (queue a, slow) -> b_middle (queue b) ->
// a_last (queue a) -> host_sink. Each device task logs its name when its work runs on the queue
// (b_middle also logs what a_source left in `value`); each host task when it runs.
struct Fixture {
  std::shared_ptr<pd::EmulatedQueue> a = std::make_shared<pd::EmulatedQueue>("a", 1ms);
  std::shared_ptr<pd::EmulatedQueue> b = std::make_shared<pd::EmulatedQueue>("b");
  Log log;
  int value = 0;  // written by a_source's work, read by b_middle's: ordered by the queue wait
  int runs = 0;   // counts a_source's work
  std::function<void()> b_middle_run;  // replaces b_middle's run when set
  pd::Plan plan;
  pd::TaskId host_source, a_after_host, a_source, b_middle, a_last, host_sink;

  Fixture() {
    const pd::ExecutorId host = plan.add_executor({"host"});
    const pd::ExecutorId on_a = plan.add_executor(pd::ExecutorSpec("a", a));
    const pd::ExecutorId on_b = plan.add_executor(pd::ExecutorSpec("b", b));
    host_source = add("host_source", host, [this] { log.add("host_source"); });
    a_after_host = add("a_after_host", on_a, [this] { on(*a, "a_after_host"); });
    a_source = add("a_source", on_a, [this] {
      a->enqueue([this] {
        value = ++runs * 10;
        log.add("a_source");
      });
    });
    b_middle = add("b_middle", on_b, [this] {
      if (b_middle_run) return b_middle_run();
      b->enqueue([this] { log.add("b_middle saw " + std::to_string(value)); });
    });
    a_last = add("a_last", on_a, [this] { on(*a, "a_last"); });
    host_sink = add("host_sink", host, [this] { log.add("host_sink"); });
    plan.add_dependency(host_source, a_after_host);
    plan.add_dependency(a_source, b_middle);
    plan.add_dependency(b_middle, a_last);
    plan.add_dependency(a_last, host_sink);
  }
  pd::TaskId add(const std::string& name, pd::ExecutorId executor, std::function<void()> run) {
    pd::Task t;
    t.name = name;
    t.location = "rank0";
    t.executor = executor;
    t.run = std::move(run);
    return plan.add_task(std::move(t));
  }
  void on(pd::EmulatedQueue& queue, const std::string& name) {
    queue.enqueue([this, name] { log.add(name); });
  }
};

}  // namespace

TEST_CASE("A plan's device region is its device tasks with no host task before them",
          "[device][graph]") {
  Fixture f;
  const pd::DeviceRegion region = pd::find_device_region(f.plan);
  CHECK(region.tasks == std::vector<pd::TaskId>{f.a_source, f.b_middle, f.a_last});
  CHECK(region.origin == f.plan.tasks()[f.a_source].executor);
  // A plan of host tasks has none.
  pd::Plan host_only;
  const pd::ExecutorId host = host_only.add_executor({"host"});
  pd::Task t;
  t.name = "alone";
  t.executor = host;
  host_only.add_task(t);
  CHECK(pd::find_device_region(host_only).empty());
}

TEST_CASE("A condensed plan keeps the other tasks and launches the region as one task",
          "[device][graph]") {
  Fixture f;
  const pd::DeviceRegion region = pd::find_device_region(f.plan);
  const pd::Plan condensed = pd::condense(f.plan, region, "graph", [] {});
  REQUIRE(condensed.tasks().size() == 4);  // 6 tasks, 3 of them now one
  const pd::TaskId graph = 3;              // added after the three kept tasks
  CHECK(condensed.tasks()[graph].name == "graph");
  CHECK(condensed.tasks()[graph].executor == region.origin);
  // a_last -> host_sink became graph -> host_sink; host_source -> a_after_host stays.
  CHECK(condensed.successors()[graph] == std::vector<pd::TaskId>{2});
  CHECK(condensed.tasks()[2].name == "host_sink");
  CHECK(condensed.successors()[0] == std::vector<pd::TaskId>{1});
}

TEST_CASE("Recording runs nothing, and each launch of the condensed plan runs the region again",
          "[device][graph]") {
  Fixture f;
  const pd::DeviceRegion region = pd::find_device_region(f.plan);
  std::unique_ptr<pd::RecordedRegion> recorded = pd::record(f.plan, region);
  f.a->drain();
  f.b->drain();
  CHECK(f.log.take().empty());
  CHECK(f.runs == 0);
  // a_source, b_middle and a_last each put one piece of work on their queues (the events that
  // join and order the queues are not work).
  CHECK(recorded->operations() == 3);

  pd::Engine engine(pd::condense(f.plan, region, "graph", [&] { recorded->launch(); }));
  for (int run = 1; run <= 3; ++run) {
    INFO("run " << run);
    engine.run();
    std::vector<std::string> log = f.log.take();
    // The host task after the region saw all of it: the region's work in its order first.
    const auto at = [&](const std::string& entry) {
      return std::find(log.begin(), log.end(), entry) - log.begin();
    };
    REQUIRE(log.size() == 6);
    CHECK(at("a_source") < at("b_middle saw " + std::to_string(run * 10)));
    CHECK(at("b_middle saw " + std::to_string(run * 10)) < at("a_last"));
    CHECK(at("a_last") < at("host_sink"));
    CHECK(at("host_source") < at("a_after_host"));
  }
  CHECK(f.runs == 3);
}

TEST_CASE("A recording whose task fails names it, and the queues work again", "[device][graph]") {
  Fixture f;
  f.plan = pd::Plan();
  const pd::ExecutorId on_a = f.plan.add_executor(pd::ExecutorSpec("a", f.a));
  f.add("fine", on_a, [&f] { f.on(*f.a, "fine"); });
  f.add("broken", on_a, [] { throw purine::Error("cannot be recorded"); });
  const pd::DeviceRegion region = pd::find_device_region(f.plan);
  REQUIRE_THROWS_WITH(pd::record(f.plan, region),
                      "recording task broken for a device graph: cannot be recorded");
  f.on(*f.a, "after");
  f.a->drain();
  CHECK(f.log.take() == std::vector<std::string>{"after"});
  CHECK(purine::LaunchWords::recording() == nullptr);
}

TEST_CASE("A launch word is made anew for each launch, before the recorded work that reads it",
          "[device][graph]") {
  // b_middle draws a number at launch, as a dropout draws its key: by value when launched op by
  // op, from a launch word (`word`, its "device memory") when recorded.
  Fixture f;
  uint64_t draws = 0;
  uint64_t word = 0;
  f.b_middle_run = [&] {
    if (purine::LaunchWords* words = purine::LaunchWords::recording()) {
      CHECK(words->size() == 0);
      words->add({&word, [&draws] { return ++draws; }});
      f.b->enqueue([&] { f.log.add("b_middle drew " + std::to_string(word)); });
    } else {
      f.b->enqueue([&f, n = ++draws] { f.log.add("b_middle drew " + std::to_string(n)); });
    }
  };
  const pd::DeviceRegion region = pd::find_device_region(f.plan);
  pd::Engine eager(f.plan);
  eager.run();  // draws 1
  std::unique_ptr<pd::RecordedRegion> recorded = pd::record(f.plan, region);
  CHECK(recorded->launch_words() == 1);
  CHECK(draws == 1);  // recording draws nothing
  pd::Engine replays(pd::condense(f.plan, region, "graph", [&] { recorded->launch(); }));
  for (int run = 0; run < 3; ++run) replays.run();  // draw 2, 3, 4
  std::vector<std::string> drawn;
  for (const std::string& entry : f.log.take())
    if (entry.rfind("b_middle drew", 0) == 0) drawn.push_back(entry);
  CHECK(drawn == std::vector<std::string>{"b_middle drew 1", "b_middle drew 2", "b_middle drew 3",
                                          "b_middle drew 4"});
}

TEST_CASE("An emulated queue that joins a recording must be rejoined", "[device][graph]") {
  pd::EmulatedQueue origin("origin"), other("other");
  auto fork = origin.create_event();
  origin.begin_capture();
  origin.record(*fork);
  other.wait(*fork);  // joins
  other.enqueue([] {});
  REQUIRE_THROWS_WITH(origin.end_capture(),
                      "device queue other joined the recording of origin but was not rejoined: "
                      "origin must wait for an event recorded on it after its last work");
  // Both record nothing any more (they run work on their own threads: an atomic count).
  std::atomic<int> ran{0};
  other.enqueue([&ran] { ++ran; });
  origin.enqueue([&ran] { ++ran; });
  other.drain();
  origin.drain();
  CHECK(ran == 2);
  CHECK_THROWS_WITH(other.end_capture(), Catch::Contains("is not recording"));
}

TEST_CASE("A device task that completes at launch releases its successors and ends the run at once",
          "[device][graph]") {
  for (const bool at_launch : {false, true}) {
    INFO("complete at launch: " << at_launch);
    // The queue sleeps 200 ms before the task's work: far longer than a run's bookkeeping.
    auto queue = std::make_shared<pd::EmulatedQueue>("q", 200ms);
    std::atomic<bool> worked{false};
    bool seen_by_successor = false;
    pd::Plan plan;
    const pd::ExecutorId host = plan.add_executor({"host"});
    const pd::ExecutorId device = plan.add_executor(pd::ExecutorSpec("q", queue));
    pd::Task launch;
    launch.name = "launch";
    launch.executor = device;
    launch.run = [&] { queue->enqueue([&] { worked = true; }); };
    launch.complete_at_launch = at_launch;
    pd::Task after;
    after.name = "after";
    after.executor = host;
    after.run = [&] { seen_by_successor = worked; };
    plan.add_dependency(plan.add_task(launch), plan.add_task(after));
    pd::Engine engine(std::move(plan));
    engine.run();
    // Completing at launch, neither the host successor nor the run's end waited for the work.
    CHECK(seen_by_successor == !at_launch);
    CHECK(worked == !at_launch);
    queue->drain();
    CHECK(worked);
  }
}
