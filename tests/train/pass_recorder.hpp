// PassRecorder: the passes each pipeline location's main thread started, in order, in the first
// iteration, from the dispatcher's task events: what a schedule (graphs/pipeline.hpp) made the
// dispatcher run, to set next to schedule_order().
#pragma once

#include <catch2/catch.hpp>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dispatcher/observer.hpp"
#include "graphs/pipeline.hpp"
#include "purine/graph.hpp"

namespace purine::testing {

// Locations are CPU locations of one rank, location s at cpu_index s. Consecutive tasks of one
// pass count once; weight-gradient ops count as their backward pass unless the schedule splits
// them. With interleaved stages, `chunk_of` tells an op's chunk, or -1 to leave it out.
class PassRecorder : public dispatch::Observer {
 public:
  PassRecorder(
      const Graph& graph, int locations, bool split_weights,
      std::function<int(const Op&)> chunk_of = [](const Op&) { return 0; })
      : graph_(graph),
        split_weights_(split_weights),
        chunk_of_(std::move(chunk_of)),
        passes_(locations) {}
  void on_task_start(const dispatch::TaskEvent& e) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const Op* op = graph_.find_op(*e.task_name);
    if (done_ || !op || op->thread() != Graph::kMainThread) return;
    if (op->role() != OpRole::kForward && op->role() != OpRole::kBackward) return;
    const std::optional<Pass> scheduled = pass_of(*op);
    const int chunk = chunk_of_(*op);
    if (!scheduled || chunk < 0) return;
    PipelineStep step{*scheduled, micro_batch_of(*op), chunk};
    if (step.pass == Pass::kWeight && !split_weights_) step.pass = Pass::kBackward;
    auto& mine = passes_.at(op->location().cpu_index);
    if (!mine.empty() && mine.back() == step) return;
    // The first iteration ends when micro-batch 0's first forward comes again.
    if (step == PipelineStep{Pass::kForward, 0, 0} && !mine.empty()) {
      done_ = true;
      return;
    }
    mine.push_back(step);
  }
  void on_task_end(const dispatch::TaskEvent&) override {}
  const std::vector<std::vector<PipelineStep>>& passes() const { return passes_; }

 private:
  const Graph& graph_;
  const bool split_weights_;
  const std::function<int(const Op&)> chunk_of_;
  std::mutex mutex_;
  bool done_ = false;
  std::vector<std::vector<PipelineStep>> passes_;
};

}  // namespace purine::testing

namespace Catch {
template <>
struct StringMaker<purine::PipelineStep> {
  static std::string convert(const purine::PipelineStep& step) {
    const char* pass = step.pass == purine::Pass::kForward    ? "F"
                       : step.pass == purine::Pass::kBackward ? "B"
                                                              : "W";
    return pass + std::to_string(step.micro_batch) + "." + std::to_string(step.chunk);
  }
};
}  // namespace Catch
