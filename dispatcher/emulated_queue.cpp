#include "dispatcher/emulated_queue.hpp"

#include <atomic>
#include <deque>
#include <exception>
#include <thread>

#include "base/error.hpp"
#include "dispatcher/internal/first_failure.hpp"
#include "dispatcher/internal/mutex.hpp"

namespace purine::dispatch {

namespace {

// The first error of a queue's work, shared with its events.
class QueueFailure {
 public:
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  void set(const std::string& message) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    if (failed_.load(std::memory_order_relaxed)) return;
    message_ = message;
    failed_.store(true, std::memory_order_release);
  }
  std::string message() const EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return message_;
  }

 private:
  std::atomic<bool> failed_{false};
  mutable Mutex mu_;
  std::string message_ GUARDED_BY(mu_);
};

// Generations: record() raises `recorded`; the queue's thread raises `reached` to it when it gets
// there. done() compares the two, so an event recorded again is pending again. Queued signals
// and waits share this state, so an event may be destroyed with work still queued (a failed
// run's).
struct EventState {
  std::atomic<uint64_t> recorded{0};
  std::atomic<uint64_t> reached{0};
  // When the queue's thread reached the latest record (written before `reached`, so a reader
  // that saw done() sees it).
  std::chrono::steady_clock::time_point reached_at;
};

class EmulatedEvent : public QueueEvent {
 public:
  explicit EmulatedEvent(std::shared_ptr<const QueueFailure> failure)
      : failure_(std::move(failure)) {}
  bool done() override {
    if (failure_->failed()) throw Error(failure_->message());
    return state->reached.load(std::memory_order_acquire) >=
           state->recorded.load(std::memory_order_relaxed);
  }
  double seconds_since(QueueEvent& earlier) override {
    const auto& e = static_cast<EmulatedEvent&>(earlier);
    return std::chrono::duration<double>(state->reached_at - e.state->reached_at).count();
  }
  const std::shared_ptr<EventState> state = std::make_shared<EventState>();

 private:
  std::shared_ptr<const QueueFailure> failure_;
};

// Set on every queue's thread.
thread_local bool on_a_queue_thread = false;

struct Item {
  enum Kind { kWork, kSignal, kWait } kind;
  std::function<void()> work;         // kWork
  std::shared_ptr<EventState> event;  // kSignal, kWait
  uint64_t generation;                // kSignal: the value to publish; kWait: to wait for
};

}  // namespace

struct EmulatedQueue::State {
  explicit State(std::string name_in, std::chrono::microseconds delay_in)
      : name(std::move(name_in)), delay(delay_in) {}
  void push(Item item) EXCLUDES(mu) {
    {
      MutexLock lock(&mu);
      items.push_back(std::move(item));
    }
    cv.signal();
  }
  void thread_main() EXCLUDES(mu);

  const std::string name;
  const std::chrono::microseconds delay;
  const std::shared_ptr<QueueFailure> failure = std::make_shared<QueueFailure>();
  Mutex mu;
  CondVar cv{&mu};
  std::deque<Item> items GUARDED_BY(mu);
  bool stop GUARDED_BY(mu) = false;
  std::thread thread;
};

void EmulatedQueue::State::thread_main() {
  on_a_queue_thread = true;
  for (;;) {
    Item item;
    {
      MutexLock lock(&mu);
      while (items.empty() && !stop) cv.wait();
      if (items.empty()) return;  // stopping, and everything queued has run
      item = std::move(items.front());
      items.pop_front();
    }
    switch (item.kind) {
      case Item::kWork:
        if (failure->failed()) break;  // skip the rest after a failure
        if (delay.count() > 0) std::this_thread::sleep_for(delay);
        try {
          item.work();
        } catch (...) {
          failure->set(str("device queue ", name, " failed: ", describe(std::current_exception())));
        }
        break;
      case Item::kSignal:  // still signalled after a failure, so that no waiter hangs
        item.event->reached_at = std::chrono::steady_clock::now();
        item.event->reached.store(item.generation, std::memory_order_release);
        break;
      case Item::kWait:
        while (item.event->reached.load(std::memory_order_acquire) < item.generation)
          std::this_thread::yield();
        break;
    }
  }
}

EmulatedQueue::EmulatedQueue(std::string name, std::chrono::microseconds delay)
    : state_(std::make_shared<State>(std::move(name), delay)) {
  state_->thread = std::thread([state = state_.get()] { state->thread_main(); });
}

EmulatedQueue::~EmulatedQueue() {
  {
    MutexLock lock(&state_->mu);
    state_->stop = true;
  }
  state_->cv.signal_all();
  state_->thread.join();
}

void EmulatedQueue::enqueue(std::function<void()> work) {
  state_->push({Item::kWork, std::move(work), nullptr, 0});
}

std::unique_ptr<QueueEvent> EmulatedQueue::create_event(bool) {
  return std::make_unique<EmulatedEvent>(state_->failure);
}

void EmulatedQueue::record(QueueEvent& event) {
  const std::shared_ptr<EventState>& e = static_cast<EmulatedEvent&>(event).state;
  const uint64_t generation = e->recorded.load(std::memory_order_relaxed) + 1;
  e->recorded.store(generation, std::memory_order_relaxed);
  state_->push({Item::kSignal, {}, e, generation});
}

void EmulatedQueue::wait(QueueEvent& event) {
  const std::shared_ptr<EventState>& e = static_cast<EmulatedEvent&>(event).state;
  state_->push({Item::kWait, {}, e, e->recorded.load(std::memory_order_relaxed)});
}

bool EmulatedQueue::on_queue_thread() { return on_a_queue_thread; }

void EmulatedQueue::drain() {
  // A signal of its own: signals are handled even after a failure, when work is skipped.
  const auto drained = std::make_shared<EventState>();
  state_->push({Item::kSignal, {}, drained, 1});
  while (drained->reached.load(std::memory_order_acquire) < 1)
    std::this_thread::sleep_for(std::chrono::microseconds(20));
}

std::string EmulatedQueue::name() const { return state_->name; }

}  // namespace purine::dispatch
