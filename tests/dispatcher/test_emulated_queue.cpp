// The emulated device queue (dispatcher/emulated_queue.hpp) and the engine's kDevice executors:
// work runs later and in order, events and cross-queue waits order it, a device successor
// launches before its predecessor's work has run while a host successor waits for it, and a
// failure on the queue fails the run naming the task.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "dispatcher/emulated_queue.hpp"
#include "dispatcher/engine.hpp"

namespace pd = purine::dispatch;
using namespace std::chrono_literals;

TEST_CASE("An emulated queue runs its work later, in order, and events say when", "[device]") {
  pd::EmulatedQueue queue("q", 2ms);
  std::vector<int> order;
  auto event = queue.create_event();
  CHECK(event->done());  // never recorded
  for (int i = 0; i < 5; ++i) queue.enqueue([&order, i] { order.push_back(i); });
  queue.record(*event);
  CHECK_FALSE(event->done());  // 5 x 2 ms of work are still ahead of it
  while (!event->done()) std::this_thread::yield();
  CHECK(order == std::vector<int>{0, 1, 2, 3, 4});
}

TEST_CASE("A wait orders work across two emulated queues", "[device]") {
  pd::EmulatedQueue slow("slow", 20ms), fast("fast");
  std::atomic<int> value{0};
  int seen = -1;
  auto produced = slow.create_event();
  auto consumed = fast.create_event();
  slow.enqueue([&value] { value.store(42); });
  slow.record(*produced);
  fast.wait(*produced);
  fast.enqueue([&value, &seen] { seen = value.load(); });
  fast.record(*consumed);
  while (!consumed->done()) std::this_thread::yield();
  CHECK(seen == 42);
}

TEST_CASE("A failure on an emulated queue is reported by its events", "[device]") {
  pd::EmulatedQueue queue("q");
  auto event = queue.create_event();
  bool skipped_ran = false;
  queue.enqueue([] { throw purine::Error("kernel exploded"); });
  queue.enqueue([&skipped_ran] { skipped_ran = true; });
  queue.record(*event);
  auto wait_done = [&event] {
    while (!event->done()) std::this_thread::yield();
  };
  REQUIRE_THROWS_WITH(wait_done(), "device queue q failed: kernel exploded");
  CHECK_FALSE(skipped_ran);
}

namespace {

pd::Task task(std::string name, pd::ExecutorId executor, std::function<void()> run) {
  pd::Task t;
  t.name = std::move(name);
  t.location = "rank0";
  t.executor = executor;
  t.run = std::move(run);
  return t;
}

// Plan: "produce" on a device queue (slow work), then "launch" on another device queue and
// "host" on a CPU thread, both reading what produce wrote.
struct DevicePlan {
  std::shared_ptr<pd::EmulatedQueue> q0 = std::make_shared<pd::EmulatedQueue>("q0", 200ms);
  std::shared_ptr<pd::EmulatedQueue> q1 = std::make_shared<pd::EmulatedQueue>("q1");
  std::atomic<bool> produced{false};
  std::atomic<bool> produced_at_launch{true};
  std::atomic<bool> produced_on_q1{false};
  std::atomic<bool> produced_at_host{false};

  pd::Plan plan() {
    pd::Plan p;
    const pd::ExecutorId cpu = p.add_executor({"cpu"});
    const pd::ExecutorId d0 = p.add_executor({"device0", q0});
    const pd::ExecutorId d1 = p.add_executor({"device1", q1});
    const pd::TaskId a =
        p.add_task(task("produce", d0, [this] { q0->enqueue([this] { produced = true; }); }));
    const pd::TaskId b = p.add_task(task("launch", d1, [this] {
      produced_at_launch = produced.load();
      q1->enqueue([this] { produced_on_q1 = produced.load(); });
    }));
    const pd::TaskId c =
        p.add_task(task("host", cpu, [this] { produced_at_host = produced.load(); }));
    p.add_dependency(a, b);
    p.add_dependency(a, c);
    return p;
  }
};

}  // namespace

TEST_CASE("A device successor launches ahead of the device, a host successor waits for it",
          "[device]") {
  DevicePlan d;
  pd::Engine engine(d.plan());
  engine.run();
  CHECK_FALSE(d.produced_at_launch);  // launched while produce's 200 ms of work were queued
  CHECK(d.produced_on_q1);            // but its own work waited for produce's event
  CHECK(d.produced_at_host);          // the host task ran once the event was done
}

TEST_CASE("The serial engine waits for each device task", "[device]") {
  DevicePlan d;
  pd::EngineOptions serial;
  serial.mode = pd::Mode::kSerial;
  pd::Engine engine(d.plan(), serial);
  engine.run();
  CHECK(d.produced_at_launch);
  CHECK(d.produced_on_q1);
  CHECK(d.produced_at_host);
}

TEST_CASE("A failure on a device queue fails the run, naming the task", "[device]") {
  auto queue = std::make_shared<pd::EmulatedQueue>("q0");
  pd::Plan plan;
  const pd::ExecutorId d0 = plan.add_executor({"device0", queue});
  const pd::ExecutorId cpu = plan.add_executor({"cpu"});
  const pd::TaskId bad = plan.add_task(
      task("conv1", d0, [queue] { queue->enqueue([] { throw purine::Error("bad launch"); }); }));
  bool host_ran = false;
  const pd::TaskId after = plan.add_task(task("after", cpu, [&host_ran] { host_ran = true; }));
  plan.add_dependency(bad, after);
  pd::Engine engine(std::move(plan));
  REQUIRE_THROWS_WITH(engine.run(), Catch::Contains("conv1") && Catch::Contains("bad launch"));
  CHECK_FALSE(host_ran);
}

namespace {

// Start and end times of each task, as the observers see them.
struct Spans : pd::Observer {
  std::mutex mu;
  std::map<std::string,
           std::pair<std::chrono::steady_clock::time_point, std::chrono::steady_clock::time_point>>
      spans;
  void on_task_start(const pd::TaskEvent& e) override {
    std::lock_guard<std::mutex> lock(mu);
    spans[*e.task_name].first = e.time;
  }
  void on_task_end(const pd::TaskEvent& e) override {
    std::lock_guard<std::mutex> lock(mu);
    spans[*e.task_name].second = e.time;
  }
  double ms(const std::string& task, bool end = true) {
    const auto& span = spans.at(task);
    return std::chrono::duration<double, std::milli>(
               (end ? span.second : span.first).time_since_epoch())
        .count();
  }
};

}  // namespace

TEST_CASE("observers see a device task's device times, not its launch", "[device]") {
  // Two tasks on one queue whose work takes 60 ms each: both launch within microseconds, but
  // the device runs them one after the other.
  auto queue = std::make_shared<pd::EmulatedQueue>("q0", 60ms);
  pd::Plan plan;
  const pd::ExecutorId d0 = plan.add_executor({"device0", queue});
  auto work = [queue] { queue->enqueue([] {}); };
  const pd::TaskId a = plan.add_task(task("a", d0, work));
  const pd::TaskId b = plan.add_task(task("b", d0, work));
  plan.add_dependency(a, b);
  Spans spans;
  pd::Engine engine(std::move(plan));
  engine.add_observer(&spans);
  for (int run = 0; run < 2; ++run) {
    engine.run();
    INFO("run " << run);
    CHECK(spans.ms("a") - spans.ms("a", false) >= 50);
    CHECK(spans.ms("b") - spans.ms("b", false) >= 50);
    CHECK(spans.ms("b", false) >= spans.ms("a") - 1);  // b ran on the device after a
  }
}

namespace {

// An EmulatedQueue whose events note when the executor asks one that is still pending while
// the one recorded before it on the queue is pending too: a question whose answer was known.
class AskCountingQueue : public purine::DeviceQueue {
 public:
  explicit AskCountingQueue(std::chrono::microseconds delay) : inner_("counted", delay) {}
  class Event : public purine::QueueEvent {
   public:
    Event(AskCountingQueue& queue, std::unique_ptr<purine::QueueEvent> inner)
        : queue_(queue), inner_(std::move(inner)) {}
    bool done() override {
      ++queue_.asked;
      const bool done = inner_->done();
      // (`before_` re-recorded since: its older record is done, being of an earlier run.)
      if (!done && before_ && before_->records_ == before_records_ && !before_->inner_->done())
        ++queue_.asked_behind;
      return done;
    }
    double seconds_since(purine::QueueEvent& e) override {
      return inner_->seconds_since(*static_cast<Event&>(e).inner_);
    }
    AskCountingQueue& queue_;
    std::unique_ptr<purine::QueueEvent> inner_;
    Event* before_ = nullptr;     // recorded just before this one's latest record
    int64_t before_records_ = 0;  // how often `before_` had been recorded then
    int64_t records_ = 0;
  };
  std::unique_ptr<purine::QueueEvent> create_event(bool timed) override {
    return std::make_unique<Event>(*this, inner_.create_event(timed));
  }
  void record(purine::QueueEvent& event) override {
    auto& e = static_cast<Event&>(event);
    e.before_ = last_;
    e.before_records_ = last_ ? last_->records_ : 0;
    ++e.records_;
    last_ = &e;
    inner_.record(*e.inner_);
  }
  void wait(purine::QueueEvent& event) override { inner_.wait(*static_cast<Event&>(event).inner_); }
  std::string name() const override { return inner_.name(); }
  void enqueue(std::function<void()> work) { inner_.enqueue(std::move(work)); }

  std::atomic<int64_t> asked{0}, asked_behind{0};

 private:
  pd::EmulatedQueue inner_;
  Event* last_ = nullptr;
};

}  // namespace

TEST_CASE("a device executor asks only the oldest pending launch of its queue", "[device]") {
  // 100 independent launches of 200 us of work each: each launch is followed by a poll while
  // the earlier ones are still queued.
  auto queue = std::make_shared<AskCountingQueue>(200us);
  pd::Plan plan;
  const pd::ExecutorId d0 = plan.add_executor({"device0", queue});
  for (int i = 0; i < 100; ++i)
    plan.add_task(task("t" + std::to_string(i), d0, [queue] { queue->enqueue([] {}); }));
  pd::Engine engine(std::move(plan));
  engine.run();
  engine.run();
  CHECK(queue->asked > 0);
  CHECK(queue->asked_behind == 0);
}
