// The Engine runs a Plan: readiness counters track dependencies, executors run ready tasks.
// Dependency tracking lives here, once; how tasks run is the executors' business. Two modes:
//   kParallel: one OS thread per ExecutorSpec (the normal mode);
//   kSerial:   every task on the caller's thread in a deterministic topological order; the
//              reference in tests and a debugging aid.
// One run at a time: run_async() then sync(), or run() for both. The same Engine runs its Plan
// again and again without rebuilding. Not thread-safe: drive it from one thread.
//
// Construction computes the deterministic topological order (throws purine::Error naming tasks
// on a cycle), chains the users of each resource in that order, and in kParallel mode starts the
// executor threads (on_thread_start runs on each; if one throws, the constructor throws).
// Stalls (kParallel only): sync() throws purine::Error listing up to 20 pending tasks, running
// ones first, with their locations; the engine then refuses further runs. Destroying a stalled
// engine does not hang: threads stuck inside a task are detached and exit, touching nothing but
// the engine's own internal state, if that task ever returns (see dispatcher/engine.cpp).
// Destroying an engine during a run that is not stalled waits for the run to finish.
//
// Usage:
//   Plan plan;
//   const ExecutorId cpu = plan.add_executor({"rank0:cpu/main"});
//   const TaskId load = plan.add_task({"load", "rank0:cpu", cpu, [] { ... }});
//   const TaskId use = plan.add_task({"use", "rank0:cpu", cpu, [] { ... }});
//   plan.add_dependency(load, use);  // use starts once load has completed
//   Engine engine(std::move(plan));
//   engine.run();  // each task once; rethrows a task's exception, naming the task
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "dispatcher/observer.hpp"
#include "dispatcher/plan.hpp"

namespace purine::dispatch {

enum class Mode { kParallel, kSerial };

struct EngineOptions {
  Mode mode = Mode::kParallel;
  // sync() throws purine::Error listing the pending tasks when no task has completed for this
  // long while work is pending. Zero disables the check.
  std::chrono::milliseconds stall_timeout{60000};
  // kParallel: how long an executor thread with nothing to do keeps looking for work (yielding
  // the CPU on every turn) before it sleeps on its condition variable. This makes hand-overs
  // between executors cost a cache miss instead of a wake-up; zero sleeps at once (least CPU).
  std::chrono::microseconds idle_spin{50};
};

class Engine {
 public:
  Engine(Plan plan, EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Starts one run of every task in the plan and returns at once.
  void run_async();
  // Waits for the run started by run_async(). Rethrows the first task failure as purine::Error
  // "task <name>: <what>"; the engine stays usable for the next run.
  void sync();
  void run() {
    run_async();
    sync();
  }

  // Observers are not owned and must outlive the engine or be removed. Not during a run.
  void add_observer(Observer* observer);
  void remove_observer(Observer* observer);

  const Plan& plan() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace purine::dispatch
