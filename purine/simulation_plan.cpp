#include "purine/simulation_plan.hpp"

#include <glog/logging.h>

#include <map>
#include <string>
#include <utility>

#include "dispatcher/device_graph.hpp"

namespace purine {
namespace {

bool joins_ranks(const Op& op) {
  return op.kernel().traits().bridges_locations &&
         op.inputs()[0]->location().rank != op.location().rank;
}

// compile()'s views (purine/internal/views.hpp) where the shapes allow them: a reshape, or a
// split or concat whose slices are contiguous (every dimension before the axis is 1).
bool likely_view(const Op& op) {
  const Aliasing aliasing = op.kernel().traits().aliasing;
  if (aliasing.kind == Aliasing::kReshape) return true;
  if (aliasing.kind != Aliasing::kSplit && aliasing.kind != Aliasing::kConcat) return false;
  const Blob* whole = aliasing.kind == Aliasing::kSplit ? op.inputs()[0] : op.outputs()[0];
  const Shape& shape = whole->shape();
  int axis = static_cast<int>(aliasing.axis);
  if (axis < 0) axis += shape.ndim();
  for (int d = 0; d < axis; ++d)
    if (shape[d] != 1) return false;
  return true;
}

class Builder {
 public:
  explicit Builder(SimulationPlan& out) : out_(out) {}

  dispatch::ExecutorId executor(Location at, const std::string& thread) {
    const std::string name = thread == Graph::kAnyThread ? Graph::kMainThread : thread;
    auto key = std::make_pair(at, name);
    auto it = executors_.find(key);
    if (it != executors_.end()) return it->second;
    const dispatch::ExecutorId id = out_.plan.add_executor({at.to_string() + "/" + name});
    out_.executor_location.push_back(at);
    out_.executor_rank.push_back(at.rank);
    return executors_.emplace(key, id).first->second;
  }

  dispatch::TaskId task(const Op* op, SimulatedTask::Role role, Location at, std::string name) {
    dispatch::Task task;
    task.name = std::move(name);
    task.location = at.to_string();
    task.executor = executor(at, op->thread());
    task.run_first = role == SimulatedTask::kSend;  // as compile() marks sends
    const dispatch::TaskId id = out_.plan.add_task(std::move(task));
    SimulatedTask info;
    info.op = op;
    info.role = role;
    info.at = at;
    info.view = role == SimulatedTask::kCompute && likely_view(*op);
    out_.tasks.push_back(info);
    by_rank_[op][at.rank] = id;
    if (op->kernel().uses_rng())
      out_.plan.use_resource(id, resource("rng@" + op->location().to_string()));
    if (op->kernel().traits().ordered_across_ranks)
      out_.plan.use_resource(id, resource("rank" + std::to_string(at.rank) + ":mpi:collectives"));
    return id;
  }

  // The task of `op` on `rank`, or -1.
  dispatch::TaskId on(const Op* op, int rank) const {
    auto it = by_rank_.find(op);
    if (it == by_rank_.end()) return -1;
    auto r = it->second.find(rank);
    return r == it->second.end() ? -1 : r->second;
  }

  // An edge between two ops where both have a task on the same rank (compile()'s rule on that
  // rank).
  void depend(const Op* before, const Op* after) {
    auto it = by_rank_.find(after);
    if (it == by_rank_.end()) return;
    for (const auto& [rank, id] : it->second) {
      const dispatch::TaskId b = on(before, rank);
      if (b >= 0) out_.plan.add_dependency(b, id);
    }
  }

 private:
  dispatch::ResourceId resource(const std::string& name) {
    auto it = resources_.find(name);
    if (it != resources_.end()) return it->second;
    return resources_.emplace(name, out_.plan.add_resource(name)).first->second;
  }

  SimulationPlan& out_;
  std::map<std::pair<Location, std::string>, dispatch::ExecutorId> executors_;
  std::map<std::string, dispatch::ResourceId> resources_;
  std::map<const Op*, std::map<int, dispatch::TaskId>> by_rank_;
};

}  // namespace

SimulationPlan build_simulation_plan(const Graph& graph, const SimulationPlanOptions& options) {
  SimulationPlan out;
  Builder builder(out);
  int max_rank = 0;
  for (const auto& b : graph.blobs()) max_rank = std::max(max_rank, b->location().rank);
  for (const auto& op : graph.ops()) max_rank = std::max(max_rank, op->location().rank);
  out.ranks = max_rank + 1;
  std::vector<std::pair<dispatch::TaskId, dispatch::TaskId>> transfers;
  for (const Op* op : graph.topological_order()) {
    const bool bridges = op->kernel().traits().bridges_locations;
    if (bridges)
      CHECK_EQ(op->inputs().size(), 1u) << op->name() << ": a bridging op reads one blob";
    if (bridges && joins_ranks(*op)) {
      const Location from = op->inputs()[0]->location(), to = op->location();
      const dispatch::TaskId send =
          builder.task(op, SimulatedTask::kSend, from,
                       op->name() + " (send to rank " + std::to_string(to.rank) + ")");
      const dispatch::TaskId receive =
          builder.task(op, SimulatedTask::kReceive, to,
                       op->name() + " (receive from rank " + std::to_string(from.rank) + ")");
      transfers.emplace_back(send, receive);
      continue;
    }
    const bool from_gpu =
        bridges && op->location().is_cpu() && !op->inputs()[0]->location().is_cpu();
    const Location at = from_gpu ? op->inputs()[0]->location() : op->location();
    builder.task(op, bridges ? SimulatedTask::kCopy : SimulatedTask::kCompute, at, op->name());
  }
  for (const auto& [send, receive] : transfers) out.plan.add_dependency(send, receive);
  for (const auto& op : graph.ops()) {
    for (const Blob* in : op->inputs())
      for (const Op* w : in->writers()) builder.depend(w, op.get());
    for (const Op* before : op->ordered_after()) builder.depend(before, op.get());
  }
  for (const auto& [rank, orders] : options.memory_orders)
    for (const auto& [before, after] : orders) {
      const dispatch::TaskId b = builder.on(before, rank), a = builder.on(after, rank);
      CHECK(b >= 0 && a >= 0) << "a memory order between " << before->name() << " and "
                              << after->name() << ", not both of rank " << rank;
      out.plan.add_dependency(b, a);
    }
  for (const auto& b : graph.blobs()) {
    const auto& writers = b->writers();
    for (size_t i = 1; i < writers.size(); ++i) builder.depend(writers[i - 1], writers[i]);
  }
  return out;
}

std::vector<dispatch::TaskId> device_graph_tasks(const SimulationPlan& sp,
                                                 const std::set<int>& ranks) {
  const dispatch::DeviceRegion region = dispatch::find_device_region(
      sp.plan, [&sp](dispatch::ExecutorId e) { return !sp.executor_location[e].is_cpu(); });
  std::vector<dispatch::TaskId> out;
  for (const dispatch::TaskId t : region.tasks)
    if (ranks.count(sp.executor_rank[sp.plan.tasks()[t].executor])) out.push_back(t);
  return out;
}

}  // namespace purine
