// Device graphs: a run's device work recorded once and replayed by one launch per run (a CUDA
// graph), instead of one launch per task from the executors. The part of a Plan that can be
// recorded is its device region: the tasks on kDevice executors with no host task before them,
// transitively (resource chains included), since nothing of the host runs inside a recording and
// a replay cannot wait for the host between its kernels. condense() puts one task in the region's
// place, which launches the recording; the other tasks, and the edges from the region to them,
// stay, so an Engine runs the condensed plan as it runs any plan. record() records the region by
// making the calls the executors would make (the same queue waits and events), in the plan's
// deterministic order, on the calling thread (after the origin executor's on_thread_start, which
// makes its device current), with the region's first queue recording.
//
// A recording keeps what its tasks' run() read on the host when they were recorded (a CUDA graph
// keeps its kernels' arguments and memory addresses): it replays correctly only while those stay
// as they were, except for the launch words its tasks added (base/device_queue.hpp), which each
// launch makes anew. Keeping the rest true is the caller's part (purine/runnable.cpp records
// once per memory layout and refuses tasks that draw random numbers at launch without words).
// Not thread-safe: one thread records and launches, between runs of the plan.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/device_queue.hpp"
#include "dispatcher/plan.hpp"

namespace purine::dispatch {

struct DeviceRegion {
  std::vector<TaskId> tasks;  // in the plan's deterministic topological order
  ExecutorId origin = -1;     // the executor of the first of them: the recording's queue
  bool empty() const { return tasks.empty(); }
};

// The plan's device region (empty when no device task qualifies).
DeviceRegion find_device_region(const Plan& plan);
// The same with `on_device` saying which executors count as device queues (a simulated plan,
// purine/simulation_plan.hpp, has no queues).
DeviceRegion find_device_region(const Plan& plan, const std::function<bool(ExecutorId)>& on_device);

// `plan` with `region` replaced by one task named `name` on region.origin that runs `launch`
// (the last task of the result; Task::complete_at_launch as given); every edge from a region
// task to another task leaves from it, and it takes the region's place in the resources its
// tasks used. The other tasks keep their order; their ids change.
Plan condense(const Plan& plan, const DeviceRegion& region, std::string name,
              std::function<void()> launch, bool complete_at_launch = false);

// A region's recording, the events it was recorded with (which it may refer to) and its launch
// words.
class RecordedRegion {
 public:
  RecordedRegion(DeviceQueue& origin, std::unique_ptr<QueueGraph> graph,
                 std::vector<std::unique_ptr<QueueEvent>> events, std::vector<LaunchWord> words)
      : origin_(origin),
        graph_(std::move(graph)),
        events_(std::move(events)),
        words_(std::move(words)) {}
  // Writes this launch's words, then puts the recorded work on the origin's queue (from the
  // thread that drives it).
  void launch() {
    for (const LaunchWord& word : words_) origin_.write_word(word.device_word, word.next());
    graph_->launch();
  }
  int launch_words() const { return static_cast<int>(words_.size()); }
  // QueueGraph::operations() of the recording.
  int operations() const { return graph_->operations(); }

 private:
  DeviceQueue& origin_;
  std::unique_ptr<QueueGraph> graph_;
  std::vector<std::unique_ptr<QueueEvent>> events_;
  std::vector<LaunchWord> words_;
};

// Records `region` of `plan` (nothing runs). Throws purine::Error naming the task whose run()
// failed or the queue that refused to record; the queues then run work again.
std::unique_ptr<RecordedRegion> record(const Plan& plan, const DeviceRegion& region);

}  // namespace purine::dispatch
