#include "purine/internal/device_graphs.hpp"

#include <glog/logging.h>

#include <set>
#include <thread>

#include "base/error.hpp"
#include "base/hash.hpp"

namespace purine {

namespace {

// Recordings kept at most: two layouts alternate in training; more means memory that moves.
constexpr size_t kMaxRecordings = 4;

}  // namespace

std::string DeviceGraphs::refusal(const Graph& graph, int rank, bool compiled) {
  std::set<int> devices;
  for (const auto& op : graph.ops()) {
    if (op->location().rank != rank) continue;
    const OperatorTraits traits = op->kernel().traits();
    bool other_rank = false;  // a copy between two ranks
    for (const Blob* b : op->inputs()) other_rank |= b->location().rank != rank;
    for (const Blob* b : op->outputs()) other_rank |= b->location().rank != rank;
    if (traits.communicates && (!traits.bridges_locations || other_rank))
      return str("op ", op->name(), " (", op->type(), ") communicates with other ranks");
    Blob* in = op->inputs().empty() ? nullptr : op->inputs()[0];
    Blob* out = op->outputs().empty() ? nullptr : op->outputs()[0];
    if (traits.bridges_locations && !other_rank && in && out &&
        in->location().is_cpu() != out->location().is_cpu()) {
      // A recording reads and writes a copy's host end when it runs only in page-locked memory.
      Blob* host = in->location().is_cpu() ? in : out;
      if (compiled && !host->tensor().is_pinned())
        return str("blob ", host->name(), ", the host end of copy ", op->name(),
                   ", is not in page-locked memory");
    }
    if (op->location().is_cpu()) continue;
    devices.insert(op->location().device);
    if (op->kernel().uses_rng() && !traits.replays_random_draws)
      return str("op ", op->name(), " (", op->type(),
                 ") draws random numbers at each launch, which a recording would repeat");
  }
  if (devices.empty()) return str("rank ", rank, " has no op at a GPU location");
  if (devices.size() > 1) return str("rank ", rank, "'s ops are at ", devices.size(), " GPUs");
  return "";
}

DeviceGraphs::DeviceGraphs(const Graph& graph, int rank, dispatch::Plan plan,
                           dispatch::EngineOptions engine_options, int eager_runs, bool run_ahead)
    : graph_(graph),
      rank_(rank),
      plan_(std::move(plan)),
      region_(dispatch::find_device_region(plan_)),
      eager_runs_(eager_runs),
      engine_options_(engine_options),
      run_ahead_(run_ahead) {
  if (region_.empty()) {
    off_reason_ = "every GPU op waits for host work";
    return;
  }
  DeviceQueue& origin = *plan_.executors()[region_.origin].queue;
  for (auto& end : ends_) end = origin.create_event();
  // Running ahead needs nothing of the run after the replay (its launch would release it).
  std::vector<bool> in_region(plan_.tasks().size(), false);
  for (const dispatch::TaskId t : region_.tasks) in_region[t] = true;
  for (const dispatch::TaskId t : region_.tasks)
    for (const dispatch::TaskId next : plan_.successors()[t])
      if (!in_region[next])
        ahead_refusal_ =
            str("task ", plan_.tasks()[next].name, " follows the recorded work in each run");
  for (size_t e = 0; e < plan_.executors().size() && gate_executor_ < 0; ++e)
    if (plan_.executors()[e].kind == dispatch::ExecutorKind::kCpuThread)
      gate_executor_ = static_cast<dispatch::ExecutorId>(e);
}

DeviceGraphs::~DeviceGraphs() {
  try {
    drain();  // the device must not work on memory that is about to go
  } catch (const Error& e) {
    LOG(WARNING) << "device graphs: " << e.what();
  }
}

std::unique_ptr<dispatch::Engine> DeviceGraphs::make_engine() {
  const bool ahead = running_ahead();
  dispatch::Plan plan = dispatch::condense(
      plan_, region_, str("device graph (", region_.tasks.size(), " ops)"), [this] { launch(); },
      ahead);
  const dispatch::TaskId launcher = static_cast<dispatch::TaskId>(plan.tasks().size()) - 1;
  if (ahead && launcher > 0 && gate_executor_ >= 0) {
    // The host tasks wait for the replay before: they may write what its copies read. (A plan
    // with host tasks has a host thread.)
    dispatch::Task gate;
    gate.name = "wait for the device graph before";
    gate.location = plan.tasks()[0].location;
    gate.executor = gate_executor_;
    gate.poll = [this] { return !previous_end_ || previous_end_->done(); };
    const dispatch::TaskId id = plan.add_task(std::move(gate));
    for (dispatch::TaskId t = 0; t < launcher; ++t) plan.add_dependency(id, t);
  }
  auto engine = std::make_unique<dispatch::Engine>(std::move(plan), engine_options_);
  for (dispatch::Observer* observer : observers_) engine->add_observer(observer);
  return engine;
}

void DeviceGraphs::launch() {
  if (previous_end_ && !previous_end_->done()) ++launched_ahead_;
  current_->launch();
  if (launch_end_) plan_.executors()[region_.origin].queue->record(*launch_end_);
}

void DeviceGraphs::sync() {
  engine_->sync();
  // At most one replay is in flight once a run has synced (its gate, if any, waited already).
  if (previous_end_)
    while (!previous_end_->done()) std::this_thread::yield();
}

void DeviceGraphs::drain() {
  QueueEvent* const end = in_flight_;
  in_flight_ = nullptr;
  if (end)
    while (!end->done()) std::this_thread::yield();
}

uint64_t DeviceGraphs::layout() const {
  uint64_t h = 0;
  for (const auto& blob : graph_.blobs()) {
    if (blob->location().rank != rank_ || !blob->has_tensor()) continue;
    const Tensor& t = blob->tensor();
    if (!t.allocated() || !t.storage()->buffer()) continue;
    h = mix64(h ^ reinterpret_cast<uintptr_t>(t.data()));
  }
  return h;
}

void DeviceGraphs::turn_off(const std::string& reason) {
  off_reason_ = reason;
  recordings_.clear();
  current_ = nullptr;
  LOG(WARNING) << "device graphs off, runs launch op by op: " << reason;
}

bool DeviceGraphs::start_run(int completed_runs) {
  if (!on() || completed_runs < eager_runs_) {
    drain();  // an eager run reads and writes what a replay may still use
    return false;
  }
  const uint64_t key = layout();
  auto it = recordings_.find(key);
  if (it == recordings_.end()) {
    drain();  // recording makes the calls of a run: none may be in flight
    if (recordings_.size() == kMaxRecordings) {
      turn_off(str("the memory of the rank's tensors moved to a ", kMaxRecordings + 1,
                   "th layout (recordings keep their addresses)"));
      return false;
    }
    try {
      it = recordings_.emplace(key, dispatch::record(plan_, region_)).first;
    } catch (const Error& e) {
      turn_off(e.what());
      return false;
    }
  }
  current_ = it->second.get();
  if (!engine_) engine_ = make_engine();
  previous_end_ = in_flight_;
  launch_end_ = running_ahead() ? ends_[replays_ % 2].get() : nullptr;
  engine_->run_async();
  in_flight_ = launch_end_;
  ++replays_;
  return true;
}

void DeviceGraphs::add_observer(dispatch::Observer* observer) {
  const bool was_ahead = running_ahead();
  observers_.push_back(observer);
  if (!engine_) return;
  if (was_ahead) {
    drain();
    engine_.reset();  // made again, without running ahead, by the next start_run()
  } else {
    engine_->add_observer(observer);
  }
}

}  // namespace purine
