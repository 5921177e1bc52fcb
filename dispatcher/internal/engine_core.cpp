#include "dispatcher/internal/engine_core.hpp"

#include <algorithm>
#include <sstream>
#include <utility>

#include "dispatcher/internal/thread_executor.hpp"

namespace purine::dispatch {

EngineCore::EngineCore(Plan plan_in, EngineOptions options_in)
    : plan(std::move(plan_in)),
      options(options_in),
      schedule(Schedule::build(plan)),
      tasks(plan, schedule) {
  thread_exited.assign(plan.executors().size(), false);
  events.resize(plan.tasks().size());
  for (size_t t = 0; t < plan.tasks().size(); ++t) {
    const ExecutorId e = plan.tasks()[t].executor;
    if (e != kAnyExecutor && plan.executors()[e].kind == ExecutorKind::kDevice)
      events[t] = plan.executors()[e].queue->create_event();
  }
}

EngineCore::~EngineCore() = default;

int EngineCore::begin_run() {
  failure.reset();
  cancelled_.store(false, std::memory_order_relaxed);
  run_index = (run_index + 1) & 0x3fffffffu;
  int active = 0;
  for (size_t e = 0; e < plan.executors().size(); ++e) {
    if (schedule.tasks_on(static_cast<ExecutorId>(e)) > 0) ++active;
  }
  // The floating tasks count as one more executor, finished when the last of them completes.
  if (schedule.floating_tasks() > 0) ++active;
  floating_left.store(schedule.floating_tasks(), std::memory_order_relaxed);
  executors_running.store(active, std::memory_order_relaxed);
  MutexLock lock(&mu);
  run_done = active == 0;
  return active;
}

void EngineCore::fail(TaskId task, std::exception_ptr error) {
  failure.record(plan.tasks()[task].name, std::move(error));
  cancel();
}

void EngineCore::executor_finished_run() {
  if (executors_running.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  MutexLock lock(&mu);
  run_done = true;
  cv.signal_all();
}

uint64_t EngineCore::progress() const {
  uint64_t total = 0;
  for (const auto& executor : executors) total += executor->completed();
  return total;
}

ThreadExecutor* EngineCore::idle_executor(ExecutorId except) const {
  for (size_t e = 0; e < executors.size(); ++e)
    if (static_cast<ExecutorId>(e) != except &&
        plan.executors()[e].kind == ExecutorKind::kCpuThread && executors[e]->idle())
      return executors[e].get();
  return nullptr;
}

void EngineCore::notify_start(TaskId task, ExecutorId executor) const {
  const Task& t = plan.tasks()[task];
  const TaskEvent event{&t.name, &t.location, &plan.executors()[executor].name, executor,
                        std::chrono::steady_clock::now()};
  for (Observer* observer : observers) observer->on_task_start(event);
}

void EngineCore::notify_end(TaskId task, ExecutorId executor) const {
  const Task& t = plan.tasks()[task];
  const TaskEvent event{&t.name, &t.location, &plan.executors()[executor].name, executor,
                        std::chrono::steady_clock::now()};
  for (Observer* observer : observers) observer->on_task_end(event);
}

void EngineCore::notify_device(TaskId task, ExecutorId executor,
                               std::chrono::steady_clock::time_point start,
                               std::chrono::steady_clock::time_point end) const {
  const Task& t = plan.tasks()[task];
  TaskEvent event{&t.name, &t.location, &plan.executors()[executor].name, executor, start};
  for (Observer* observer : observers) observer->on_task_start(event);
  event.time = end;
  for (Observer* observer : observers) observer->on_task_end(event);
}

void EngineCore::prepare_device_timing() {
  if (!timings.empty()) return;
  timings.resize(plan.tasks().size());
  for (size_t t = 0; t < plan.tasks().size(); ++t) {
    if (!events[t]) continue;
    DeviceQueue& queue = *plan.executors()[plan.tasks()[t].executor].queue;
    timings[t].start = queue.create_event(/*timed=*/true);
    timings[t].end = queue.create_event(/*timed=*/true);
  }
}

std::string EngineCore::stall_report(std::chrono::milliseconds quiet_for) const {
  constexpr size_t kShown = 20;
  const int n = schedule.num_tasks();
  std::vector<std::pair<TaskId, const char*>> pending;  // running first, then polling, waiting
  std::vector<bool> running(n, false);
  for (const auto& executor : executors) {
    const TaskId t = executor->current_task();
    if (t >= 0) {
      running[t] = true;
      pending.emplace_back(t, "running");
    }
  }
  std::vector<TaskId> waiting;
  for (TaskId t = 0; t < n; ++t) {
    if (running[t]) continue;
    switch (tasks.state(t, run_index)) {
      case TaskTable::kDone:
        break;
      case TaskTable::kPolling:
        pending.emplace_back(t, "started, polling for completion");
        break;
      case TaskTable::kWaiting:
        waiting.push_back(t);
        break;
    }
  }
  for (TaskId t : waiting) pending.emplace_back(t, "not started");

  std::ostringstream out;
  out << "dispatcher stalled: no task completed for " << quiet_for.count() << " ms while "
      << pending.size() << " of " << n << " tasks are pending (EngineOptions::stall_timeout). "
      << "Pending tasks, running first:";
  for (size_t i = 0; i < std::min(kShown, pending.size()); ++i) {
    const Task& task = plan.tasks()[pending[i].first];
    out << "\n  " << task.name << " @ " << task.location << " on "
        << (task.executor == kAnyExecutor ? std::string("any executor")
                                          : plan.executors()[task.executor].name)
        << ": " << pending[i].second;
  }
  if (pending.size() > kShown) out << "\n  ... and " << pending.size() - kShown << " more";
  if (failure.failed()) out << "\nThe run had already failed: " << failure.message();
  out << "\nA running task that never returns (a deadlock, a message that never arrives, a dead "
         "peer) holds up the run; find why it blocks.";
  return out.str();
}

}  // namespace purine::dispatch
