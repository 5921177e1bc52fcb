// ThreadExecutor: one OS thread running the tasks of one ExecutorSpec (kCpuThread or kMpi) as
// they become ready. Each thread keeps a private LIFO of ready tasks: a successor that becomes
// ready on the thread that owns it is pushed there without locking or waking anyone, which is
// what makes a chain of small tasks cheap. Ready tasks marked Task::run_first (MPI sends) go
// before all others, and the thread polls nothing while one waits: a thread posts its messages
// before it computes or moves received bytes, so that a peer waiting for them is not held up
// (two ranks exchanging buffers otherwise took turns). Floating tasks (kAnyExecutor) that become
// ready here stay here too, unless this thread already has work and another is idle. Tasks made
// ready by other threads arrive through the inbox (mutex + condition variable). A thread with
// nothing to do spins for EngineOptions::idle_spin (yielding on every turn), then sleeps on the
// condition variable.
//
// Tasks with a poll() callback stay in flight after run() returns and are polled between other
// tasks; while only polled tasks remain the thread polls and yields, pausing briefly between
// rounds only once nothing has finished for a second, and never sleeps on the condition variable.
// Any executor kind may own polled tasks: the Runnable puts an MPI transfer on its op's own thread.
//
// A kDevice executor (plan.hpp) drives one device queue: before a task's run() it makes the queue
// wait for the events of the task's predecessors on other queues (Schedule::queue_waits), after
// it records the task's event and releases the successors on device executors at once; the task
// then stays in flight, polled through its event, until the host successors may be released.
// Observers see a device task when it is done, with the device's start and end times (timed
// events around its work), not the host's launch. A task that completes at launch
// (Task::complete_at_launch) is complete, with all its successors released, once its event is
// recorded; observers do not see it.
//
// The OS thread is named after the executor (without the rank prefix), for top -H and gdb.
//
// Ownership: owned by the EngineCore; the thread holds the core alive through a shared_ptr until
// it exits. The Engine starts the thread, asks it to stop, then joins it, or after a stall detaches
// it if it is stuck inside a task (abandon_if_busy()).
//
// Thread-safety: push(), push_all(), request_stop(), current_task(), completed() and
// abandon_if_busy() may be called from any thread; everything else runs on the executor's thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "dispatcher/internal/mutex.hpp"
#include "dispatcher/plan.hpp"

namespace purine::dispatch {

struct EngineCore;

class ThreadExecutor {
 public:
  ThreadExecutor(EngineCore* core, ExecutorId id);
  ~ThreadExecutor();
  ThreadExecutor(const ThreadExecutor&) = delete;
  ThreadExecutor& operator=(const ThreadExecutor&) = delete;

  // Starts the thread. It calls on_thread_start, reports to the core, then runs tasks until
  // asked to stop; it keeps `core` alive until it exits.
  void start(std::shared_ptr<EngineCore> core);
  // Hands over tasks that are ready to run.
  void push(TaskId task) EXCLUDES(mu_);
  void push_all(const std::vector<TaskId>& tasks) EXCLUDES(mu_);
  // The thread exits once its queues are empty (in-flight polled tasks are dropped).
  void request_stop() EXCLUDES(mu_);
  void join();
  void detach();

  // The task whose run() or poll() is executing now, or -1.
  TaskId current_task() const { return current_.load(std::memory_order_relaxed); }
  // Tasks this executor completed (run or skipped) since it started; for stall detection.
  uint64_t completed() const { return completed_.load(std::memory_order_relaxed); }
  // True while the thread waits for work (spinning or asleep): a hint for handing out floating
  // tasks, stale by the time it is read.
  bool idle() const { return idle_.load(std::memory_order_relaxed); }
  // When the thread is inside a task, marks it abandoned and returns true: once the task returns
  // the thread exits without touching anything but the core (no observer, no further task).
  // Returns false when the thread is between tasks.
  bool abandon_if_busy();

 private:
  // How long polling rounds that finish nothing go on back to back (yielding) before the
  // executor pauses between rounds, and the pause.
  static constexpr std::chrono::milliseconds kPollSpin{1000};
  static constexpr std::chrono::microseconds kPollPause{20};

  static constexpr TaskId kIdle = -1;
  static constexpr TaskId kAbandoned = -2;

  void thread_main(std::shared_ptr<EngineCore> core);
  // Each returns false when the thread must exit.
  bool loop();
  bool execute(TaskId task);
  bool poll_in_flight();
  // kDevice: records the anchor unless this run has one (call before a traced task's work).
  void anchor_run();
  // kDevice: reports a completed traced task's device start and end to the observers.
  void report_device_times(TaskId task);
  bool fetch(bool block) EXCLUDES(mu_);
  // Releases the successors [first, last) of a task (TaskTable's successor pointers).
  void release(const TaskId* first, const TaskId* last);
  // A ready task of this executor, to run on this thread; take_ready() returns the next one to
  // run (Task::run_first ones before the others), has_ready() whether there is one.
  void keep(TaskId task);
  bool has_ready() const { return !first_.empty() || !local_.empty(); }
  TaskId take_ready();
  // The task is complete: releases its successors not yet released (all of them, unless it is a
  // device task whose work was put on the queue) and does the run's bookkeeping.
  void complete(TaskId task, bool issued_on_queue = false);

  EngineCore* const core_;
  const ExecutorId id_;
  const int tasks_per_run_;
  const bool cpu_thread_;     // kind kCpuThread
  DeviceQueue* const queue_;  // kind kDevice: the queue it drives; else null
  // kDevice under observation: an event recorded at the run's first traced task, while the
  // queue is idle, and the host time then; device times are read relative to it.
  std::unique_ptr<QueueEvent> anchor_;
  std::chrono::steady_clock::time_point anchor_time_;
  uint32_t anchored_run_ = ~0u;
  std::thread thread_;

  // Owned by the executor thread.
  std::vector<TaskId> first_;      // ready Task::run_first tasks, LIFO, before local_'s
  std::vector<TaskId> local_;      // the other ready tasks, LIFO
  std::vector<TaskId> in_flight_;  // run() returned, poll() not yet true
  int completed_this_run_ = 0;

  std::atomic<TaskId> current_{kIdle};
  std::atomic<uint64_t> completed_{0};
  std::atomic<bool> has_inbox_{false};  // hint: inbox_ may be non-empty
  std::atomic<bool> stopping_{false};   // hint: stop_ is set
  std::atomic<bool> idle_{false};       // in fetch(block=true)

  Mutex mu_;
  CondVar cv_{&mu_};
  std::vector<TaskId> inbox_ GUARDED_BY(mu_);
  bool sleeping_ GUARDED_BY(mu_) = false;
  bool stop_ GUARDED_BY(mu_) = false;
};

}  // namespace purine::dispatch
