#include "dispatcher/emulated_queue.hpp"

#include <atomic>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <thread>
#include <vector>

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

struct Recording;

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
  // The open recording that recorded this event, if any: a queue that waits for it joins that
  // recording. Used by the recording thread only.
  std::shared_ptr<Recording> recorded_in;
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

// The calls made on the queues of one recording (DeviceQueue::begin_capture), in order, each
// with a closure that makes it again on its queue.
struct Recording {
  struct Step {
    const void* queue;  // the queue's State
    std::string queue_name;
    Item::Kind kind;
    const EventState* event;  // kSignal, kWait
    std::function<void()> replay;
  };
  const void* origin = nullptr;
  std::string origin_name;
  std::vector<Step> steps;
  std::vector<std::shared_ptr<EventState>> tagged;  // events recorded while recording
  std::vector<std::function<void()>> leave;         // ends the recording on each of its queues

  // Every queue that joined ended with a signal that the origin waited for afterwards (what CUDA
  // requires of a capture, too).
  void check_rejoined() const {
    std::map<const void*, size_t> last_step;
    for (size_t i = 0; i < steps.size(); ++i) last_step[steps[i].queue] = i;
    for (const auto& [queue, i] : last_step) {
      if (queue == origin) continue;
      const Step& last = steps[i];
      bool rejoined = false;
      for (size_t j = i + 1; j < steps.size() && last.kind == Item::kSignal; ++j)
        rejoined |= steps[j].queue == origin && steps[j].kind == Item::kWait &&
                    steps[j].event == last.event;
      require(rejoined, "device queue ", last.queue_name, " joined the recording of ", origin_name,
              " but was not rejoined: ", origin_name,
              " must wait for an event recorded on it after its last work");
    }
  }
};

// A recording's calls, made again by each launch.
class ReplayedCalls : public QueueGraph {
 public:
  ReplayedCalls(std::vector<std::function<void()>> calls, int work)
      : calls_(std::move(calls)), work_(work) {}
  void launch() override {
    for (const auto& call : calls_) call();
  }
  int operations() const override { return work_; }

 private:
  std::vector<std::function<void()>> calls_;
  int work_;  // the calls that run work (not events)
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
  void signal(const std::shared_ptr<EventState>& event) {
    const uint64_t generation = event->recorded.load(std::memory_order_relaxed) + 1;
    event->recorded.store(generation, std::memory_order_relaxed);
    push({Item::kSignal, {}, event, generation});
  }
  void wait_for(const std::shared_ptr<EventState>& event) {
    push({Item::kWait, {}, event, event->recorded.load(std::memory_order_relaxed)});
  }
  std::shared_ptr<Recording> recording_now() EXCLUDES(mu) {
    MutexLock lock(&mu);
    return recording;
  }
  void set_recording(std::shared_ptr<Recording> r) EXCLUDES(mu) {
    MutexLock lock(&mu);
    recording = std::move(r);
  }

  const std::string name;
  const std::chrono::microseconds delay;
  const std::shared_ptr<QueueFailure> failure = std::make_shared<QueueFailure>();
  Mutex mu;
  CondVar cv{&mu};
  std::deque<Item> items GUARDED_BY(mu);
  bool stop GUARDED_BY(mu) = false;
  std::shared_ptr<Recording> recording GUARDED_BY(mu);  // while this queue records
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
  if (const std::shared_ptr<Recording> r = state_->recording_now()) {
    r->steps.push_back({state_.get(), state_->name, Item::kWork, nullptr,
                        [state = state_, work = std::move(work)] {
                          state->push({Item::kWork, work, nullptr, 0});
                        }});
    return;
  }
  state_->push({Item::kWork, std::move(work), nullptr, 0});
}

void EmulatedQueue::write_word(void* device_word, uint64_t value) {
  enqueue([device_word, value] { std::memcpy(device_word, &value, sizeof value); });
}

std::unique_ptr<QueueEvent> EmulatedQueue::create_event(bool) {
  return std::make_unique<EmulatedEvent>(state_->failure);
}

void EmulatedQueue::record(QueueEvent& event) {
  const std::shared_ptr<EventState>& e = static_cast<EmulatedEvent&>(event).state;
  if (const std::shared_ptr<Recording> r = state_->recording_now()) {
    e->recorded_in = r;
    r->tagged.push_back(e);
    r->steps.push_back({state_.get(), state_->name, Item::kSignal, e.get(),
                        [state = state_, e] { state->signal(e); }});
    return;
  }
  state_->signal(e);
}

void EmulatedQueue::wait(QueueEvent& event) {
  const std::shared_ptr<EventState>& e = static_cast<EmulatedEvent&>(event).state;
  std::shared_ptr<Recording> r = state_->recording_now();
  if (!r && e->recorded_in) {  // joins the recording that recorded the event
    r = e->recorded_in;
    state_->set_recording(r);
    r->leave.push_back([state = state_] { state->set_recording(nullptr); });
  }
  if (r) {
    r->steps.push_back({state_.get(), state_->name, Item::kWait, e.get(),
                        [state = state_, e] { state->wait_for(e); }});
    return;
  }
  state_->wait_for(e);
}

void EmulatedQueue::begin_capture() {
  require(!state_->recording_now(), "device queue ", state_->name, " is recording already");
  auto r = std::make_shared<Recording>();
  r->origin = state_.get();
  r->origin_name = state_->name;
  r->leave.push_back([state = state_] { state->set_recording(nullptr); });
  state_->set_recording(std::move(r));
}

std::unique_ptr<QueueGraph> EmulatedQueue::end_capture() {
  const std::shared_ptr<Recording> r = state_->recording_now();
  require(r && r->origin == state_.get(), "device queue ", state_->name,
          " is not recording (end_capture() belongs to the queue that began it)");
  for (const auto& leave : r->leave) leave();
  for (const auto& e : r->tagged) e->recorded_in.reset();
  r->check_rejoined();
  std::vector<std::function<void()>> calls;
  int work = 0;
  for (auto& step : r->steps) {
    calls.push_back(std::move(step.replay));
    work += step.kind == Item::kWork;
  }
  return std::make_unique<ReplayedCalls>(std::move(calls), work);
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
