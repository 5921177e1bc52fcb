#include "purine/compile.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <set>
#include <utility>

#include "base/device_runtime.hpp"
#include "base/error.hpp"
#include "base/hash.hpp"
#include "operators/compute_threads.hpp"
#include "purine/internal/memory_plan.hpp"
#include "purine/internal/views.hpp"

namespace purine {

namespace {

// What one synchronous task needs at run time, resolved once at compile time.
struct OpBinding {
  Operator* kernel;
  std::vector<const Tensor*> inputs;
  std::vector<Tensor*> outputs;
  OpContext context;
};

uint64_t location_seed(uint64_t seed, Location l) {
  // Distinct, fixed streams per location: (seed, rank, device, CPU index) mixed.
  return mix64(seed +
               0x9E3779B97F4A7C15ULL * (static_cast<uint64_t>(l.rank) * 1024 + l.device + 2) +
               0xD1B54A32D192ED03ULL * static_cast<uint64_t>(l.cpu_index));
}

// An op joining two ranks: it bridges locations and reads a blob of another rank.
bool joins_ranks(const Op& op) {
  if (!op.kernel().traits().bridges_locations) return false;
  CHECK_EQ(op.inputs().size(), 1u) << op.name() << ": a bridging op reads one blob";
  return op.inputs()[0]->location().rank != op.location().rank;
}

// Tags for every cross-rank op, derived from the op names so that all ranks agree: a hash,
// probed past collisions between ops of the same (source, destination) pair in name order.
std::map<const Op*, int> assign_tags(const Graph& graph, int bound) {
  std::vector<const Op*> joining;
  for (const auto& op : graph.ops())
    if (joins_ranks(*op)) joining.push_back(op.get());
  std::sort(joining.begin(), joining.end(),
            [](const Op* a, const Op* b) { return a->name() < b->name(); });
  std::map<std::pair<int, int>, std::set<int>> used;
  std::map<const Op*, int> tags;
  for (const Op* op : joining) {
    const int from = op->inputs()[0]->location().rank, to = op->location().rank;
    auto& taken = used[{from, to}];
    require(static_cast<int>(taken.size()) < bound, "graph '", graph.name(), "' has more than ",
            bound, " copies from rank ", from, " to rank ", to, ", the MPI tags available");
    int tag = static_cast<int>(fnv1a64(op->name()) % static_cast<uint64_t>(bound));
    while (taken.count(tag)) tag = (tag + 1) % bound;
    taken.insert(tag);
    tags[op] = tag;
  }
  return tags;
}

int threads_per_location(const Graph& graph, const CompileOptions& options) {
  std::set<Location> cpus;
  for (const auto& op : graph.ops())
    if (op->location().rank == options.rank && op->location().is_cpu()) cpus.insert(op->location());
  return std::max<int>(1, options.compute_threads / std::max<size_t>(1, cpus.size()));
}

// Builds the plan's executors: one per (location, thread name) of this rank, and its "mpi" one.
// At a GPU location the executor drives a stream of its own (a kDevice executor).
class Executors {
 public:
  Executors(dispatch::Plan& plan, int threads) : plan_(plan), threads_(threads) {}

  dispatch::ExecutorId get(Location location, const std::string& thread,
                           dispatch::ExecutorKind kind = dispatch::ExecutorKind::kCpuThread) {
    auto key = std::make_pair(location, thread);
    auto it = ids_.find(key);
    if (it != ids_.end()) return it->second;
    const std::string name = location.to_string() + "/" + thread;
    dispatch::ExecutorSpec spec(name, kind);
    if (!location.is_cpu()) {
      const int device = location.device;
      DeviceRuntime& runtime = require_device(device, "thread '" + name + "'");
      spec = dispatch::ExecutorSpec(name, runtime.make_queue(device, name));
      spec.on_thread_start = [&runtime, device] { runtime.use_device(device); };
    } else if (kind == dispatch::ExecutorKind::kCpuThread) {
      spec.on_thread_start = [threads = threads_] { set_compute_threads(threads); };
    }
    return ids_.emplace(key, plan_.add_executor(std::move(spec))).first->second;
  }
  // The device queue an executor drives (null for host executors).
  DeviceQueue* queue(dispatch::ExecutorId id) const {
    return id == dispatch::kAnyExecutor ? nullptr : plan_.executors()[id].queue.get();
  }
  // The executor of an op's thread; Graph::kAnyThread floats over the rank's CPU executors, of
  // which there is then at least Graph::kMainThread.
  dispatch::ExecutorId of_thread(Location location, const std::string& thread) {
    if (thread != Graph::kAnyThread) return get(location, thread);
    // A GPU op is never a host thread's: it goes to its location's main stream.
    if (!location.is_cpu()) return get(location, Graph::kMainThread);
    get(location, Graph::kMainThread);
    return dispatch::kAnyExecutor;
  }

 private:
  dispatch::Plan& plan_;
  const int threads_;
  std::map<std::pair<Location, std::string>, dispatch::ExecutorId> ids_;
};

// Page-locked memory for `host` where the runtime can give it: a new tensor for a blob without
// one; for a blob whose memory was written before (the learning rate), a move of that memory's
// values to page-locked memory, exchanged under every tensor and view that shares it. A view
// into a larger block keeps its memory.
void pin(Blob* host) {
  if (!host->has_tensor()) {
    host->alias(Tensor::pinned(host->shape(), host->location()));
    return;
  }
  Tensor& tensor = host->tensor();
  if (tensor.is_pinned() || !tensor.covers_storage() || !tensor.storage()->buffer()) return;
  Tensor pinned = Tensor::pinned(tensor.shape(), tensor.location());
  if (!pinned.is_pinned()) return;
  pinned.copy_from(tensor);
  tensor.swap_memory(pinned);
}

// The host blobs of this rank's copies between the host and a GPU.
std::vector<Blob*> host_ends_of_gpu_copies(const Graph& graph, int rank) {
  std::vector<Blob*> ends;
  for (const auto& op : graph.ops()) {
    if (!op->kernel().traits().bridges_locations || op->location().rank != rank) continue;
    Blob* in = op->inputs()[0];
    Blob* out = op->outputs()[0];
    if (in->location().rank != rank || in->location().is_cpu() == out->location().is_cpu())
      continue;
    ends.push_back(in->location().is_cpu() ? in : out);
  }
  return ends;
}

}  // namespace

// The host ends of this rank's copies to and from its GPUs get page-locked memory (where the
// runtime can give it), so that those copies run asynchronously on the GPU's stream and a
// recorded CUDA graph reads and writes them when it runs, not when it was recorded. So does the
// other blob of a swap with such an end (a batch prefetched into it is swapped into the copy's
// input after each run): a swap exchanges the memory itself.
void pin_host_ends_of_gpu_copies(Graph& graph, int rank) {
  for (Blob* host : host_ends_of_gpu_copies(graph, rank)) pin(host);
  for (const auto& [a, b] : graph.swaps())
    for (auto [pinned, other] : {std::pair(a, b), std::pair(b, a)})
      if (pinned->has_tensor() && pinned->tensor().is_pinned() && !other->has_tensor() &&
          other->location().rank == rank)
        other->alias(Tensor::pinned(other->shape(), other->location()));
}

int graph_ranks(const Graph& graph) {
  int max_rank = 0;
  for (const auto& b : graph.blobs()) max_rank = std::max(max_rank, b->location().rank);
  for (const auto& op : graph.ops()) max_rank = std::max(max_rank, op->location().rank);
  return max_rank + 1;
}

std::map<int, std::vector<std::pair<const Op*, const Op*>>> memory_plan_orders(
    Graph& graph, const std::set<const Blob*>& observed) {
  std::map<int, std::vector<std::pair<const Op*, const Op*>>> orders;
  MemoryPlanner planner(graph);  // one order of the ops for every rank
  const std::vector<Op*> order = graph.topological_order();
  for (int rank = 0; rank < graph_ranks(graph); ++rank) {
    alias_views(graph, rank, order);
    // pin_host_ends_of_gpu_copies() would give the host ends without memory a buffer of their
    // own (the swapped blobs it pins too share none anyway): here they keep it by being read.
    std::set<const Blob*> kept = observed;
    for (Blob* host : host_ends_of_gpu_copies(graph, rank))
      if (!host->has_tensor()) kept.insert(host);
    orders[rank] = planner.plan(rank, /*reuse=*/true, kept, /*allocate=*/false).orders;
  }
  return orders;
}

CompiledGraph compile(Graph& graph, const CompileOptions& options) {
  const int me = options.rank;
  CompiledGraph out;
  dispatch::Plan& plan = out.plan;
  out.compute_threads_per_location = threads_per_location(graph, options);
  Executors executors(plan, out.compute_threads_per_location);
  const std::map<const Op*, int> tags = assign_tags(graph, options.tag_upper_bound);
  const std::set<const Op*> views = alias_views(graph, me);
  pin_host_ends_of_gpu_copies(graph, me);
  MemoryPlanResult memory = plan_memory(graph, me, options.reuse_memory, options.observed);
  out.memory = std::move(memory.plan);
  std::map<Location, dispatch::ResourceId> generator_resources;
  int ordered = -1;  // the resource serializing ops every rank must start in one order

  for (Op* op : graph.topological_order()) {
    const OperatorTraits traits = op->kernel().traits();
    PeerLink link;
    if (tags.count(op)) {
      const bool sends = op->inputs()[0]->location().rank == me;
      link = {sends ? PeerLink::kSend : PeerLink::kReceive,
              sends ? op->location().rank : op->inputs()[0]->location().rank, tags.at(op)};
    }
    if (op->location().rank != me && link.side != PeerLink::kSend) continue;

    auto binding = std::make_shared<OpBinding>();
    binding->kernel = &op->kernel();
    // Only this rank's tensors: the other side of a cross-rank op stays null.
    for (Blob* b : op->inputs())
      binding->inputs.push_back(b->location().rank == me ? &b->tensor() : nullptr);
    for (Blob* b : op->outputs())
      binding->outputs.push_back(b->location().rank == me ? &b->tensor() : nullptr);
    binding->context.comm = options.comm;
    binding->context.link = link;
    if (op->kernel().uses_rng()) {
      auto& rng = out.generators[op->location()];
      if (!rng) rng = std::make_unique<Rng>(location_seed(options.seed, op->location()));
      binding->context.rng = rng.get();
    }

    dispatch::Task task;
    task.name = op->name();
    if (link.side == PeerLink::kSend)
      task.name += " (send to rank " + std::to_string(link.peer) + ")";
    if (link.side == PeerLink::kReceive)
      task.name += " (receive from rank " + std::to_string(link.peer) + ")";
    // A send runs on the sending rank, at the location of the blob it sends; so does a copy from
    // a GPU to the host (on that GPU's stream).
    const bool from_gpu = traits.bridges_locations && op->location().is_cpu() &&
                          !op->inputs()[0]->location().is_cpu();
    const Location at = link.side == PeerLink::kSend || (from_gpu && link.side == PeerLink::kNone)
                            ? op->inputs()[0]->location()
                            : op->location();
    task.location = at.to_string();
    task.executor = executors.of_thread(at, op->thread());
    task.run_first = link.side == PeerLink::kSend;  // the peer waits for it
    binding->context.queue = executors.queue(task.executor);

    op->kernel().prepare(binding->inputs, binding->outputs, binding->context);
    std::shared_ptr<AsyncWork> work =
        op->kernel().bind_async(binding->inputs, binding->outputs, binding->context);
    if (views.count(op)) {
      // Its outputs are views of its inputs (or the reverse): nothing to compute. The task
      // stays, so that readers still wait for the writers on the other side.
    } else if (work) {
      // Started on the op's own thread and polled there between that thread's other tasks (a
      // reduction's transfers, sums and updates on one thread save a hand-over per step).
      if (traits.communicates && options.single_mpi_thread)
        task.executor = executors.get(Location::cpu(me), "mpi", dispatch::ExecutorKind::kMpi);
      task.run = [work] { work->start(); };
      task.poll = [work] { return work->done(); };
    } else {
      task.run = [binding] {
        binding->kernel->compute(binding->inputs, binding->outputs, binding->context);
      };
    }
    const dispatch::TaskId id = plan.add_task(std::move(task));
    out.tasks[op] = id;
    if (link.side != PeerLink::kNone) out.links[op] = link;
    if (traits.ordered_across_ranks) {
      if (ordered < 0) ordered = plan.add_resource("mpi:collectives");
      plan.use_resource(id, ordered);
    }
    if (op->kernel().uses_rng()) {
      auto res = generator_resources.find(op->location());
      if (res == generator_resources.end())
        res = generator_resources
                  .emplace(op->location(), plan.add_resource("rng@" + op->location().to_string()))
                  .first;
      plan.use_resource(id, res->second);
    }
  }
  // Dependencies: every writer of an input before the reader, and every order (Graph::add_order);
  // the writers of an accumulating
  // blob one after another, in creation order. Writers on other ranks are reached through the
  // receive task of the copy that brings their value here.
  for (const auto& [op, id] : out.tasks) {
    for (const Blob* in : op->inputs())
      for (const Op* w : in->writers()) {
        auto it = out.tasks.find(w);
        if (it != out.tasks.end()) plan.add_dependency(it->second, id);
      }
    for (const Op* before : op->ordered_after()) {
      auto it = out.tasks.find(before);
      if (it != out.tasks.end()) plan.add_dependency(it->second, id);
    }
  }
  for (const auto& [before, after] : memory.orders)
    plan.add_dependency(out.tasks.at(before), out.tasks.at(after));
  for (const auto& b : graph.blobs()) {
    const auto& writers = b->writers();
    for (size_t i = 1; i < writers.size(); ++i) {
      auto a = out.tasks.find(writers[i - 1]), c = out.tasks.find(writers[i]);
      if (a != out.tasks.end() && c != out.tasks.end()) plan.add_dependency(a->second, c->second);
    }
  }
  return out;
}

}  // namespace purine
