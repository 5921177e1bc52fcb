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
    QueueEvent* const event = core.events[task].get();
    try {
      if (observed) core.notify_start(task, executor);
      if (spec.run) spec.run();
      // A device task's work is waited for at once: every task after it sees it done, and its
      // observed span covers the device's work.
      if (event) {
        core.plan.executors()[executor].queue->record(*event);
        while (!event->done()) std::this_thread::yield();
      }
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
    if (!spec.poll || core.cancelled()) continue;
    try {
      while (!spec.poll()) std::this_thread::yield();
    } catch (...) {
      core.fail(task, std::current_exception());
    }
  }
}

}  // namespace purine::dispatch
