// A Plan is the dispatcher's whole view of one run: tasks (opaque callables), the executor each
// runs on, the dependencies between them and the mutable resources they share. The dispatcher
// never learns what a task does (the engine is not aware of the operation performed); purine/
// compiles a bi-graph into a Plan. A Plan is built once, then handed to an Engine and run many
// times. Not thread-safe while being built; immutable afterwards.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/device_queue.hpp"

namespace purine::dispatch {

using TaskId = int;
using ExecutorId = int;
using ResourceId = int;

// Task::executor for a task that may run on any kCpuThread executor: the one that completes its
// last predecessor runs it next (a chain of such tasks never changes threads), unless that
// executor has other work ready and another kCpuThread one is idle, which then gets it (a kMpi
// executor completing it keeps it only when no other is idle). Sources start on the kCpuThread
// executors in turn.
constexpr ExecutorId kAnyExecutor = -1;

enum class ExecutorKind {
  kCpuThread,  // one OS thread running its tasks in readiness order
  kMpi,        // progresses non-blocking communication (see Task::poll)
  // One OS thread driving one in-order device queue (ExecutorSpec::queue: a CUDA stream). Its
  // tasks' run() only puts work on the queue. After it returns, the executor records the task's
  // event on the queue and at once releases the successors that are on kDevice executors too
  // (each first makes its own queue wait for that event, or needs nothing on the same queue);
  // the other successors are released when the event is done (polled between tasks). So the
  // host keeps launching ahead of the device, and no device is synchronized per task.
  kDevice,
};

struct ExecutorSpec {
  ExecutorSpec() = default;
  // So that {"rank0:cpu/main"} and {"mpi", ExecutorKind::kMpi} spell a spec without warnings.
  ExecutorSpec(std::string name_in, ExecutorKind kind_in = ExecutorKind::kCpuThread,
               std::function<void()> on_thread_start_in = {})
      : name(std::move(name_in)), kind(kind_in), on_thread_start(std::move(on_thread_start_in)) {}
  // A kDevice executor on `queue` (one queue per executor).
  ExecutorSpec(std::string name_in, std::shared_ptr<DeviceQueue> queue_in)
      : name(std::move(name_in)), kind(ExecutorKind::kDevice), queue(std::move(queue_in)) {}

  std::string name;  // e.g. "rank0:cpu/main"; shown by observers and the tracer
  ExecutorKind kind = ExecutorKind::kCpuThread;
  // Called once on the executor's own OS thread before its first task (pin threads, set the
  // BLAS/OpenMP thread count, ...). May be empty.
  std::function<void()> on_thread_start;
  // kDevice only: the queue its tasks put their work on. Shared with the tasks that launch on it.
  std::shared_ptr<DeviceQueue> queue;
};

struct Task {
  std::string name;         // the op's full name, used in errors, stall reports and traces
  std::string location;     // e.g. "rank0:cpu"; for observers and traces
  ExecutorId executor = 0;  // or kAnyExecutor
  // Runs the task. An exception thrown here fails the run: the engine finishes the bookkeeping
  // of the remaining tasks without running them and rethrows from Engine::sync(), naming the task.
  // May be empty: the task then only orders its predecessors before its successors.
  std::function<void()> run;
  // Optional: for tasks that start asynchronous work (an MPI_Isend, a CUDA launch) inside run().
  // When set, the task is complete only once poll() returns true; the executor keeps polling it
  // between other tasks. Exceptions thrown by poll() fail the run like those from run().
  // Not for tasks on kDevice executors, whose completion is their queue event's.
  std::function<bool()> poll;
  // kDevice tasks only: the task is complete once its work is on the queue, not once the queue
  // has run it. Its successors, and the run's end, then wait for the launch alone; whoever set
  // this waits for the device's work itself, and observers do not see the task. For a task whose
  // device work nothing in the run reads on the host (a replay launched ahead of the device,
  // purine/internal/device_graphs.hpp).
  bool complete_at_launch = false;
  // Run before the executor's other ready tasks, and before it polls its transfers in flight:
  // for a task that others wait for and that takes little time itself (an MPI send, whose peer
  // waits for the message while this thread would otherwise compute first).
  bool run_first = false;
};

class Plan {
 public:
  ExecutorId add_executor(ExecutorSpec spec);
  // task.executor must name an executor already added, or be kAnyExecutor once the plan has
  // a kCpuThread executor (checked). A task on a kDevice executor has no poll (checked).
  TaskId add_task(Task task);
  // `after` starts only once `before` has completed. Duplicate edges are fine; a task depending on
  // itself throws purine::Error. Ids must come from this plan (checked).
  void add_dependency(TaskId before, TaskId after);
  ResourceId add_resource(std::string name);
  // Tasks using one resource never overlap and always run in the same order: their order in a
  // deterministic topological sort of the plan (ties broken by task id). Makes runs that share an
  // RNG bit-identical across executors and thread counts.
  void use_resource(TaskId task, ResourceId resource);

  const std::vector<ExecutorSpec>& executors() const { return executors_; }
  const std::vector<Task>& tasks() const { return tasks_; }
  const std::vector<std::vector<TaskId>>& successors() const { return successors_; }
  const std::vector<std::string>& resources() const { return resources_; }
  const std::vector<std::vector<TaskId>>& resource_users() const { return resource_users_; }

 private:
  std::vector<ExecutorSpec> executors_;
  std::vector<Task> tasks_;
  std::vector<std::vector<TaskId>> successors_;
  std::vector<std::string> resources_;
  std::vector<std::vector<TaskId>> resource_users_;
};

}  // namespace purine::dispatch
