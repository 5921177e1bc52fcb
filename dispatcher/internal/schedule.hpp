// Schedule: the immutable dependency structure an Engine derives from a Plan once, at
// construction. It holds the deterministic topological order (Kahn's algorithm, ties broken by
// the smallest task id), the successor lists in compressed form with duplicate edges dropped and
// the resource chains added (the users of each resource, in topological order, each depending on
// the previous one), the in-degree of every task, and per executor its task count and its source
// tasks (those with no predecessor). For kDevice executors (plan.hpp) it also sorts each task's
// successors so that those on kDevice executors come first, and lists, per device task, the
// predecessors on other device queues that its queue must wait for, and which tasks run first
// (Task::run_first) in a compact form. Building it throws
// purine::Error when the plan has a cycle.
// Read-only after build(), so any thread may read it without locking.
#pragma once

#include <vector>

#include "dispatcher/plan.hpp"

namespace purine::dispatch {

class Schedule {
 public:
  // Throws purine::Error naming the tasks of one cycle when the plan is not acyclic.
  static Schedule build(const Plan& plan);

  int num_tasks() const { return static_cast<int>(in_degree_.size()); }
  // Every task once; each after all its predecessors (resource chains included).
  const std::vector<TaskId>& order() const { return order_; }
  const TaskId* successors_begin(TaskId task) const { return &successors_[offsets_[task]]; }
  const TaskId* successors_end(TaskId task) const { return &successors_[offsets_[task + 1]]; }
  // successors [begin, device_successors_end) are on kDevice executors, the rest are not.
  const TaskId* device_successors_end(TaskId task) const {
    return &successors_[device_successors_end_[task]];
  }
  // For a task on a kDevice executor: its predecessors on other kDevice executors (the events
  // its queue waits for before its work); empty for other tasks.
  const std::vector<TaskId>& queue_waits(TaskId task) const { return queue_waits_[task]; }
  int in_degree(TaskId task) const { return in_degree_[task]; }
  bool runs_first(TaskId task) const { return runs_first_[task] != 0; }  // Task::run_first
  const std::vector<int>& in_degrees() const { return in_degree_; }
  const std::vector<TaskId>& sources(ExecutorId executor) const { return sources_[executor]; }
  int tasks_on(ExecutorId executor) const { return tasks_per_executor_[executor]; }
  // Tasks with executor kAnyExecutor (their sources are in sources(e) of the executors in turn).
  int floating_tasks() const { return floating_tasks_; }

 private:
  std::vector<TaskId> order_;
  std::vector<int> offsets_;  // successors of t: successors_[offsets_[t] .. offsets_[t + 1])
  std::vector<TaskId> successors_;
  std::vector<int> device_successors_end_;
  std::vector<std::vector<TaskId>> queue_waits_;
  std::vector<int> in_degree_;
  std::vector<char> runs_first_;
  std::vector<std::vector<TaskId>> sources_;
  std::vector<int> tasks_per_executor_;
  int floating_tasks_ = 0;
};

}  // namespace purine::dispatch
