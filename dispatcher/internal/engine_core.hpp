// EngineCore: the state one Engine shares with its executor threads: the plan and its schedule,
// the task table (readiness counters, owners, progress stamps), the first failure, the observers
// and the signalling of run completion, thread start-up and thread exit.
//
// Ownership: held through std::shared_ptr by the Engine and by every executor thread, so that a
// thread the Engine abandons inside a stuck task (see engine.cpp) never outlives what it touches.
// The executors are owned here too (their threads are joined or detached by the Engine).
//
// Thread-safety: plan, options and schedule are immutable; tasks documents its own. observers and
// run_index are written by the Engine only between runs and read by executor threads only during
// runs; the queues that start a run and the mutex that ends it order those accesses. Everything
// else is atomic or GUARDED_BY(mu).
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "dispatcher/engine.hpp"
#include "dispatcher/internal/first_failure.hpp"
#include "dispatcher/internal/mutex.hpp"
#include "dispatcher/internal/schedule.hpp"
#include "dispatcher/internal/task_table.hpp"
#include "dispatcher/plan.hpp"

namespace purine::dispatch {

class ThreadExecutor;

struct EngineCore {
  // Builds the schedule; throws purine::Error when the plan has a cycle.
  EngineCore(Plan plan, EngineOptions options);
  ~EngineCore();

  // Between runs: clears the failure and the cancel flag, advances run_index and arms the
  // completion count. Returns the number of executors that have tasks.
  int begin_run() EXCLUDES(mu);
  // A task failed (its run() or poll() threw): keep the first failure and cancel the run.
  void fail(TaskId task, std::exception_ptr error);
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }
  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }

  // Called by an executor thread when it has completed all its tasks of the run, and once more
  // by whichever completes the last floating (kAnyExecutor) task.
  void executor_finished_run() EXCLUDES(mu);
  // A kCpuThread executor other than `except` waiting for work, or null; for handing out
  // floating tasks.
  ThreadExecutor* idle_executor(ExecutorId except) const;
  // Tasks completed (run or skipped) by all executors since construction.
  uint64_t progress() const;
  // Observer calls; only when has_observers.
  void notify_start(TaskId task, ExecutorId executor) const;
  void notify_end(TaskId task, ExecutorId executor) const;
  // A device task's start and end on the device, in host time.
  void notify_device(TaskId task, ExecutorId executor,
                     std::chrono::steady_clock::time_point start,
                     std::chrono::steady_clock::time_point end) const;
  // Between runs: makes the timed events of device tasks, once.
  void prepare_device_timing();
  // Pending tasks of the current run, running ones first, for the stall error.
  std::string stall_report(std::chrono::milliseconds quiet_for) const;

  const Plan plan;
  const EngineOptions options;
  const Schedule schedule;
  TaskTable tasks;  // readiness counters, owners, successors, progress stamps
  // Per task on a kDevice executor, its event on that executor's queue (null for other tasks):
  // recorded after the task's work, waited for by successors on other queues, polled for the
  // successors on the host.
  std::vector<std::unique_ptr<QueueEvent>> events;
  // Traced device tasks (made by prepare_device_timing() when the first observer comes): timed
  // events around each device task's work, so that observers see the device's own start and end
  // (ThreadExecutor converts them to host time through an anchor event per run).
  struct DeviceTiming {
    std::unique_ptr<QueueEvent> start, end;
  };
  std::vector<DeviceTiming> timings;  // per task; empty when no observer was ever added
  FirstFailure failure;
  std::vector<Observer*> observers;  // between runs only
  bool has_observers = false;        // between runs only
  uint32_t run_index = 0;            // between runs only
  std::vector<std::unique_ptr<ThreadExecutor>> executors;
  std::atomic<int> executors_running{0};
  std::atomic<int> floating_left{0};  // floating tasks not yet completed in this run

  Mutex mu;
  CondVar cv{&mu};  // signalled on run completion, thread start-up and thread exit
  bool run_done GUARDED_BY(mu) = true;
  int threads_started GUARDED_BY(mu) = 0;
  std::string startup_error GUARDED_BY(mu);
  std::vector<bool> thread_exited GUARDED_BY(mu);

 private:
  std::atomic<bool> cancelled_{false};
};

}  // namespace purine::dispatch
