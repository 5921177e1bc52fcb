// TaskTable: the engine's per-task bookkeeping for runs, and the one place where readiness is
// counted. Each task has one 32-byte record (never straddling a cache line) holding everything an
// executor touches for it: the readiness counter (predecessors still to complete in this run),
// the owning executor, the successor range, a progress stamp and a pointer to the Task itself.
//
// Readiness: executors call satisfy() for each successor of a task they completed; the call that
// removes the last predecessor learns that the task is ready and re-arms its counter for the next
// run at once (nothing else touches that counter again during this run), so runs need no reset
// pass. Tasks with a single predecessor skip the atomic entirely.
//
// Thread-safety: satisfy() may be called from any thread. Its decrement is acq_rel, so the thread
// that sees a task become ready has seen everything its predecessors wrote; that thread must then
// hand the task over through a synchronizing queue (the executors' queues do). Progress stamps
// are relaxed atomics, read racily by stall reports. Between runs the engine orders everything
// with mutexes. Owned by the EngineCore; does not own the Plan or Schedule it points into.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "dispatcher/internal/schedule.hpp"
#include "dispatcher/plan.hpp"

namespace purine::dispatch {

class TaskTable {
 public:
  // What a task has reached in a run, stamped with the run index (0..2^30-1).
  enum State : uint32_t { kWaiting = 0, kPolling = 1, kDone = 2 };

  TaskTable(const Plan& plan, const Schedule& schedule);
  TaskTable(const TaskTable&) = delete;
  TaskTable& operator=(const TaskTable&) = delete;

  // One predecessor of `task` completed. True when it was the last one: the task is ready.
  bool satisfy(TaskId task) {
    Record& r = records_[task];
    if (r.initial == 1) return true;
    if (r.remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return false;
    r.remaining.store(r.initial, std::memory_order_relaxed);
    return true;
  }

  const Task& task(TaskId task) const { return *records_[task].task; }
  ExecutorId owner(TaskId task) const { return records_[task].owner; }
  const TaskId* successors_begin(TaskId task) const { return successors_ + records_[task].begin; }
  const TaskId* successors_end(TaskId task) const { return successors_ + records_[task].end; }

  // Cache hints: an executor is about to satisfy `task` (its record) or to run it (its Task).
  void prefetch_record(TaskId task) const { __builtin_prefetch(&records_[task], 1, 3); }
  void prefetch_task(TaskId task) const {
    const Task* t = records_[task].task;
    __builtin_prefetch(&t->run, 0, 3);
    __builtin_prefetch(&t->poll, 0, 3);
  }

  void set_state(TaskId task, uint32_t run, State state) {
    records_[task].state.store(run << 2 | state, std::memory_order_relaxed);
  }
  State state(TaskId task, uint32_t run) const {
    const uint32_t word = records_[task].state.load(std::memory_order_relaxed);
    return (word >> 2) == (run & 0x3fffffffu) ? static_cast<State>(word & 3u) : kWaiting;
  }

 private:
  struct alignas(32) Record {
    std::atomic<int> remaining{0};
    int initial = 0;
    ExecutorId owner = 0;
    int begin = 0;  // successors: successors_[begin .. end)
    int end = 0;
    std::atomic<uint32_t> state{0};
    const Task* task = nullptr;
  };
  static_assert(sizeof(Record) == 32, "one record must not straddle a cache line");

  std::unique_ptr<Record[]> records_;
  const TaskId* successors_;
};

}  // namespace purine::dispatch
