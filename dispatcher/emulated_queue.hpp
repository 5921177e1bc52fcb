// EmulatedQueue: a DeviceQueue (base/device_queue.hpp) whose "device" is one host thread. Work
// put on it with enqueue() runs later on that thread, in order; events and waits behave as CUDA's
// do (an event is done once the queue has run everything put before its latest record; a wait
// holds back the work put after it). It lets the dispatcher's device executors, their events and
// cross-queue waits be tested without a GPU, and a delay per item makes "later" really later.
//
// Recording (begin_capture/end_capture) keeps each call on the queues that join it, in order;
// launching the graph makes the same calls again, so its work runs anew each time (a CPU kernel
// then reads its tensors' memory as it is at that time, where a CUDA graph keeps the addresses it
// was recorded with).
//
// Ownership: the queue owns its thread; the destructor runs what is queued, then joins. Events
// must not outlive the queue that created them. Thread-safety: enqueue(), record() and wait()
// from the one thread that drives the queue; an event's done() and drain() from any thread. An
// exception thrown by work is kept: every later done() of this queue's events rethrows it as
// purine::Error naming the queue, and the queue skips its remaining work.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "base/device_queue.hpp"

namespace purine::dispatch {

class EmulatedQueue : public DeviceQueue {
 public:
  // `delay`: how long the queue's thread sleeps before each piece of work.
  explicit EmulatedQueue(std::string name,
                         std::chrono::microseconds delay = std::chrono::microseconds(0));
  ~EmulatedQueue() override;
  EmulatedQueue(const EmulatedQueue&) = delete;
  EmulatedQueue& operator=(const EmulatedQueue&) = delete;

  // Puts `work` on the queue: it runs on the queue's thread after everything put before it.
  void enqueue(std::function<void()> work);
  void enqueue_host(std::function<void()> work) override { enqueue(std::move(work)); }
  // Device memory is host memory here: the write is queued work.
  void write_word(void* device_word, uint64_t value) override;
  // Returns once everything put on the queue before this call has run (or been skipped after a
  // failure): the emulated device synchronize. Unlike the others, callable from any thread.
  void drain();
  // Whether the calling thread is some EmulatedQueue's (it runs queued work).
  static bool on_queue_thread();

  std::unique_ptr<QueueEvent> create_event(bool timed = false) override;
  void record(QueueEvent& event) override;
  void wait(QueueEvent& event) override;
  std::string name() const override;
  void begin_capture() override;
  std::unique_ptr<QueueGraph> end_capture() override;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace purine::dispatch
