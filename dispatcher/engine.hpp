// The Engine runs a Plan: readiness counters track dependencies, executors run ready tasks.
// Dependency tracking lives here, once; how tasks run is the executors' business. Two modes:
//   kParallel: one OS thread per ExecutorSpec (the normal mode);
//   kSerial:   every task on the caller's thread in a deterministic topological order; the
//              reference in tests and a debugging aid.
// One run at a time: run_async() then sync(), or run() for both. The same Engine runs its Plan
// again and again without rebuilding. Not thread-safe: drive it from one thread.
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
