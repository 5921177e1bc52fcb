// Observers see every task start and end: executor, location and time. They are called on the
// executor's own thread, so an implementation must be thread-safe and cheap (the tracer appends
// to a per-executor buffer).
#pragma once

#include <chrono>
#include <string>

namespace purine::dispatch {

struct TaskEvent {
  const std::string* task_name;
  const std::string* location;
  const std::string* executor_name;
  int executor;
  std::chrono::steady_clock::time_point time;
};

class Observer {
 public:
  virtual ~Observer() = default;
  virtual void on_task_start(const TaskEvent& event) = 0;
  virtual void on_task_end(const TaskEvent& event) = 0;
};

}  // namespace purine::dispatch
