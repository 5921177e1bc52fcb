#include "purine/internal/device_graphs.hpp"

#include <glog/logging.h>

#include <set>

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
                           dispatch::EngineOptions engine_options, int eager_runs)
    : graph_(graph),
      rank_(rank),
      plan_(std::move(plan)),
      region_(dispatch::find_device_region(plan_)),
      eager_runs_(eager_runs) {
  if (region_.empty()) {
    off_reason_ = "every GPU op waits for host work";
    return;
  }
  engine_ = std::make_unique<dispatch::Engine>(
      dispatch::condense(plan_, region_, str("device graph (", region_.tasks.size(), " ops)"),
                         [this] { current_->launch(); }),
      engine_options);
}

DeviceGraphs::~DeviceGraphs() = default;

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
  if (!on() || completed_runs < eager_runs_) return false;
  const uint64_t key = layout();
  auto it = recordings_.find(key);
  if (it == recordings_.end()) {
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
  engine_->run_async();
  ++replays_;
  return true;
}

void DeviceGraphs::add_observer(dispatch::Observer* observer) {
  if (engine_) engine_->add_observer(observer);
}

}  // namespace purine
