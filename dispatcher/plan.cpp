#include "dispatcher/plan.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "base/error.hpp"

namespace purine::dispatch {

ExecutorId Plan::add_executor(ExecutorSpec spec) {
  CHECK((spec.kind == ExecutorKind::kDevice) == (spec.queue != nullptr))
      << "executor " << spec.name << ": a kDevice executor, and only one, has a device queue";
  executors_.push_back(std::move(spec));
  return static_cast<ExecutorId>(executors_.size()) - 1;
}

TaskId Plan::add_task(Task task) {
  const auto is_cpu_thread = [](const ExecutorSpec& e) {
    return e.kind == ExecutorKind::kCpuThread;
  };
  CHECK(task.executor >= 0 || (task.executor == kAnyExecutor &&
                               std::any_of(executors_.begin(), executors_.end(), is_cpu_thread)))
      << "task " << task.name << " names no executor (a floating task needs a kCpuThread one)";
  CHECK_LT(task.executor, static_cast<int>(executors_.size()))
      << "task " << task.name << " names an executor the plan does not have";
  CHECK(task.executor < 0 || executors_[task.executor].kind != ExecutorKind::kDevice || !task.poll)
      << "task " << task.name << " is on a device queue, whose event completes it: no poll";
  CHECK(!task.complete_at_launch ||
        (task.executor >= 0 && executors_[task.executor].kind == ExecutorKind::kDevice))
      << "task " << task.name << " completes at launch but is on no device queue";
  tasks_.push_back(std::move(task));
  successors_.emplace_back();
  return static_cast<TaskId>(tasks_.size()) - 1;
}

void Plan::add_dependency(TaskId before, TaskId after) {
  CHECK_GE(before, 0);
  CHECK_LT(before, static_cast<int>(tasks_.size()));
  CHECK_GE(after, 0);
  CHECK_LT(after, static_cast<int>(tasks_.size()));
  require(before != after, "task ", tasks_[before].name,
          " cannot depend on itself: a self-edge would make the plan never finish");
  successors_[before].push_back(after);
}

ResourceId Plan::add_resource(std::string name) {
  resources_.push_back(std::move(name));
  resource_users_.emplace_back();
  return static_cast<ResourceId>(resources_.size()) - 1;
}

void Plan::use_resource(TaskId task, ResourceId resource) {
  CHECK_GE(task, 0);
  CHECK_LT(task, static_cast<int>(tasks_.size()));
  CHECK_GE(resource, 0);
  CHECK_LT(resource, static_cast<int>(resources_.size()));
  resource_users_[resource].push_back(task);  // duplicates are dropped by the engine
}

}  // namespace purine::dispatch
