#include "dispatcher/internal/serial_runner.hpp"

#include <exception>
#include <thread>

#include "dispatcher/internal/engine_core.hpp"

namespace purine::dispatch {

void run_serial(EngineCore& core) {
  const bool observed = core.has_observers;
  for (const TaskId task : core.schedule.order()) {
    if (core.cancelled()) return;
    const Task& spec = core.plan.tasks()[task];
    const ExecutorId executor = spec.executor == kAnyExecutor ? 0 : spec.executor;
    try {
      if (observed) core.notify_start(task, executor);
      if (spec.run) spec.run();
    } catch (...) {
      core.fail(task, std::current_exception());
    }
    if (observed) {
      try {
        core.notify_end(task, executor);
      } catch (...) {
        core.fail(task, std::current_exception());
      }
    }
    if (core.cancelled()) continue;
    QueueEvent* event = core.events[task].get();
    if (!spec.poll && !event) continue;
    try {
      // A device task's work is waited for at once: every task after it sees it done.
      if (event) core.plan.executors()[executor].queue->record(*event);
      while (event ? !event->done() : !spec.poll()) std::this_thread::yield();
    } catch (...) {
      core.fail(task, std::current_exception());
    }
  }
}

}  // namespace purine::dispatch
