// DeviceQueue: an in-order queue of work on a device (a CUDA stream, or a host thread that
// emulates one: dispatcher/emulated_queue.hpp). Work put on a queue runs later, in the order it
// was put there; a QueueEvent marks a point in a queue, so that the host can ask whether the
// queue has passed it (done()) and another queue can wait for it (wait()) without the host
// waiting at all. The dispatcher's device executors (dispatcher/plan.hpp, ExecutorKind::kDevice)
// use these three calls to launch a task as soon as its inputs are ready and to hand readiness
// to other queues and to the host; they never synchronize a device per task.
//
// Thread-safety: record() and wait() are called from the thread that drives the queue (one
// dispatcher executor); done() from any thread. An event recorded on one queue may be waited
// for by another queue's driving thread once the recording call has returned (the dispatcher
// orders the two through its readiness counters).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace purine {

class QueueEvent {
 public:
  virtual ~QueueEvent() = default;
  // True once the queue has run everything put on it before the latest record() of this event
  // (also true before the first record()). Throws purine::Error if the device failed.
  virtual bool done() = 0;
  // Device seconds from `earlier` to this event, both timed events of one queue, recorded and
  // done (for traces: the device's own times, not the host's launch times).
  virtual double seconds_since(QueueEvent& earlier) = 0;
};

// A queue's work recorded once (DeviceQueue::end_capture) and run again, whole, by each launch():
// a CUDA graph. Thread-safety: launch() from the thread that drives the queue it was recorded on.
class QueueGraph {
 public:
  virtual ~QueueGraph() = default;
  // Puts the recorded work on the queue it was recorded on, as one piece: work put on that
  // queue afterwards starts once all of it has run, on every queue it spanned.
  virtual void launch() = 0;
  // How many operations of the device one launch runs (a CUDA graph's kernel, copy and memset
  // nodes; an emulated device's calls, one per op), or -1 where unknown.
  virtual int operations() const { return -1; }
};

// A value the host makes anew for every launch of a recording, such as a dropout's random key.
// A recording keeps its kernels' arguments, so a kernel that needs such a value reads it from
// device memory instead, and says how the host makes it: while a recording is made on this
// thread (LaunchWords::recording()), it adds a LaunchWord; each launch of the recording then
// calls every `next` in the order they were added and writes the values (write_word()) on the
// launching queue just before the recorded work.
struct LaunchWord {
  void* device_word = nullptr;     // 8 bytes of device memory the recorded work reads
  std::function<uint64_t()> next;  // called on the launching thread, once per launch
};

// The launch words of the recording being made on the calling thread, from construction to
// take(). One at a time per thread. Not thread-safe: the recording thread only.
class LaunchWords {
 public:
  LaunchWords();
  ~LaunchWords();
  LaunchWords(const LaunchWords&) = delete;
  LaunchWords& operator=(const LaunchWords&) = delete;
  // The collector of the recording made on this thread, or null when none is.
  static LaunchWords* recording();
  // How many words were added so far (the next word's index).
  int size() const { return static_cast<int>(words_.size()); }
  void add(LaunchWord word) { words_.push_back(std::move(word)); }
  // The words added, in order; the thread records no more.
  std::vector<LaunchWord> take();

 private:
  std::vector<LaunchWord> words_;
};

class DeviceQueue {
 public:
  virtual ~DeviceQueue() = default;
  // A new event of this queue; made once per task when a plan is compiled, reused every run.
  // Only a `timed` one answers seconds_since() (timing costs a little on some devices).
  virtual std::unique_ptr<QueueEvent> create_event(bool timed = false) = 0;
  // Marks the current end of this queue: `event` is done once everything put on the queue
  // before this call has run.
  virtual void record(QueueEvent& event) = 0;
  // Work put on this queue after this call starts only once `event` (of any queue, recorded
  // before this call) is done.
  virtual void wait(QueueEvent& event) = 0;
  // A name for traces and errors ("gpu0 stream main").
  virtual std::string name() const = 0;
  // Puts host work on the queue, run in its order: the kernels of an emulated device
  // (DeviceRuntime::kernels_on_host()). The default throws purine::Error: a CUDA stream runs
  // only device work.
  virtual void enqueue_host(std::function<void()> work);
  // Puts a write of `value` to the 8 bytes of device memory at `device_word` on the queue: a
  // launch word's value (LaunchWord), passed by value, so the host may forget it at once. The
  // default throws purine::Error: this queue cannot record.
  virtual void write_word(void* device_word, uint64_t value);

  // Recording (CUDA stream capture). From begin_capture() until end_capture(), work put on this
  // queue is recorded, not run; so is the work of every queue made to wait() for an event
  // recorded here while recording (it joins the recording), which must be rejoined before
  // end_capture(): this queue waits for an event recorded on it after its last work. Only the
  // calling thread may use the queues meanwhile. end_capture() returns what was recorded, or
  // throws purine::Error (a call that cannot be recorded, a queue not rejoined); either way the
  // queues then run work again. The defaults throw purine::Error: this queue cannot record.
  virtual void begin_capture();
  virtual std::unique_ptr<QueueGraph> end_capture();
};

}  // namespace purine
