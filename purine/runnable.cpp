#include "purine/runnable.hpp"

#include <glog/logging.h>
#include <mpi.h>

#include <algorithm>
#include <set>

#include "base/error.hpp"
#include "base/hash.hpp"
#include "operators/copy.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/mpi/transfer.hpp"
#include "purine/views.hpp"

namespace purine {

namespace {

// What one compute task needs at run time, resolved once at build time.
struct OpBinding {
  Operator* kernel;
  std::vector<const Tensor*> inputs;
  std::vector<Tensor*> outputs;
  OpContext context;
};

uint64_t location_seed(uint64_t seed, Location l) {
  // Distinct, fixed streams per location; splitmix-style mixing of (seed, rank, device, CPU).
  return mix64(seed +
               0x9E3779B97F4A7C15ULL * (static_cast<uint64_t>(l.rank) * 1024 + l.device + 2) +
               0xD1B54A32D192ED03ULL * static_cast<uint64_t>(l.cpu_index));
}

bool is_cross_rank_copy(const Op& op) {
  return op.type() == "copy" && op.inputs().size() == 1 &&
         op.inputs()[0]->location().rank != op.location().rank;
}

int mpi_tag_upper_bound() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return 32767;
  int* value = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found);
  return found && value ? *value : 32767;
}

// Tags for every cross-rank copy, derived from the op names so that all ranks agree: a hash,
// probed past collisions between copies of the same (source, destination) pair in name order.
std::map<const Op*, int> assign_tags(const Graph& graph) {
  std::vector<const Op*> copies;
  for (const auto& op : graph.ops())
    if (is_cross_rank_copy(*op)) copies.push_back(op.get());
  std::sort(copies.begin(), copies.end(),
            [](const Op* a, const Op* b) { return a->name() < b->name(); });
  const int bound = mpi_tag_upper_bound();
  std::map<std::pair<int, int>, std::set<int>> used;
  std::map<const Op*, int> tags;
  for (const Op* op : copies) {
    auto& taken = used[{op->inputs()[0]->location().rank, op->location().rank}];
    int tag = stable_tag(op->name(), bound);
    while (taken.count(tag)) tag = (tag + 1) % bound;
    taken.insert(tag);
    tags[op] = tag;
  }
  return tags;
}

int graph_ranks(const Graph& graph);

void check_world(const Graph& graph, const RunOptions& options) {
  const int max_rank = graph_ranks(graph) - 1;
  // A graph on several ranks needs exactly its world; a graph on rank 0 alone runs in any world
  // (the other ranks have nothing of it to run).
  require(max_rank == 0 || max_rank + 1 == options.world_size, "graph '", graph.name(), "' spans ",
          max_rank + 1, " rank", max_rank ? "s" : "", " (0..", max_rank, ") but the MPI world has ",
          options.world_size, "; launch it with mpirun -np ", max_rank + 1);
  require(options.rank >= 0 && options.rank < options.world_size, "rank ", options.rank,
          " is outside the world of ", options.world_size);
  require(options.world_size == 1 || options.mode == dispatch::Mode::kParallel,
          "the serial executor runs single-process graphs only; graph '", graph.name(), "' spans ",
          options.world_size, " ranks");
}

// The rank's compute threads shared evenly among its CPU locations (at least one each).
int compute_threads_per_location(const Graph& graph, const RunOptions& options) {
  std::set<Location> cpus;
  for (const auto& op : graph.ops())
    if (op->location().rank == options.rank && op->location().is_cpu()) cpus.insert(op->location());
  return std::max<int>(1, options.compute_threads / std::max<size_t>(1, cpus.size()));
}

int graph_ranks(const Graph& graph) {
  int max_rank = 0;
  for (const auto& b : graph.blobs()) max_rank = std::max(max_rank, b->location().rank);
  for (const auto& op : graph.ops()) max_rank = std::max(max_rank, op->location().rank);
  return max_rank + 1;
}

}  // namespace

// Never freed before MPI_Finalize: a collective abandoned by a stalled run may still be pending
// on it, and MPI would go on using it when the late peers arrive.
class Runnable::Communicator {
 public:
  Communicator() { MPI_Comm_dup(MPI_COMM_WORLD, &comm_); }
  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_;
};

Runnable::Runnable(Graph& graph, RunOptions options) : graph_(graph), options_(options) {
  graph_.validate();
  check_world(graph_, options_);
  const int me = options_.rank;
  const int threads = compute_threads_per_location(graph_, options_);
  dispatch::Plan plan;
  std::map<std::pair<Location, std::string>, dispatch::ExecutorId> executors;
  auto executor = [&](Location location, const std::string& thread, dispatch::ExecutorKind kind) {
    auto key = std::make_pair(location, thread);
    auto it = executors.find(key);
    if (it != executors.end()) return it->second;
    dispatch::ExecutorSpec spec(location.to_string() + "/" + thread, kind);
    if (kind == dispatch::ExecutorKind::kCpuThread)
      spec.on_thread_start = [threads] { set_compute_threads(threads); };
    return executors.emplace(key, plan.add_executor(std::move(spec))).first->second;
  };
  // The executor of an op's thread; Graph::kAnyThread floats over the rank's executors, of
  // which there is then at least "main".
  auto thread_of = [&](Location location, const std::string& thread) {
    if (thread != Graph::kAnyThread)
      return executor(location, thread, dispatch::ExecutorKind::kCpuThread);
    executor(location, "main", dispatch::ExecutorKind::kCpuThread);
    return dispatch::kAnyExecutor;
  };
  // Without MPI_THREAD_MULTIPLE one thread must make every MPI call: this rank's "mpi" executor.
  const bool single_mpi_thread = !mpi_thread_multiple();
  std::map<Location, dispatch::ResourceId> rng_resources;
  int collectives = -1;
  std::map<const Op*, int> tags = assign_tags(graph_);
  // Collective over every rank: they all build the same graph in the same order.
  if (graph_ranks(graph_) > 1) comm_ = std::make_unique<Communicator>();
  const MPI_Comm comm = comm_ ? comm_->get() : MPI_COMM_WORLD;
  const std::set<const Op*> views = alias_views(graph_, me);
  std::map<const Op*, dispatch::TaskId> task_of;

  for (Op* op : graph_.topological_order()) {
    const bool cross_rank = is_cross_rank_copy(*op);
    const bool sends = cross_rank && op->inputs()[0]->location().rank == me;
    if (op->location().rank != me && !sends) continue;
    dispatch::Task task;
    task.name = op->name();
    // A send runs on the sending rank, at the location of the blob it sends.
    const Location at = sends ? op->inputs()[0]->location() : op->location();
    task.location = at.to_string();
    if (cross_rank || op->type() == "mpi_allreduce") {
      // Communication: started on the op's own thread (on the sending rank: the sender's
      // location, the op's thread name) and polled there between that thread's other tasks.
      // Keeping a reduction's transfers, sums and updates on one thread saves a hand-over per
      // step, and on a machine without spare cores a thread per direction only adds switches.
      task.executor = single_mpi_thread
                          ? executor(Location::cpu(me), "mpi", dispatch::ExecutorKind::kMpi)
                          : thread_of(at, op->thread());
      auto transfer = std::make_shared<MpiTransfer>(comm);
      if (op->type() == "mpi_allreduce") {
        const Tensor* in = &op->inputs()[0]->tensor();
        Tensor* out = &op->outputs()[0]->tensor();
        task.run = [transfer, in, out] { transfer->start_allreduce(*in, *out); };
      } else if (sends) {
        const Tensor* in = &op->inputs()[0]->tensor();
        const int peer = op->location().rank, tag = tags.at(op);
        task.name += " (send to rank " + std::to_string(peer) + ")";
        task.run = [transfer, in, peer, tag] { transfer->start_send(*in, peer, tag); };
      } else {
        Tensor* out = &op->outputs()[0]->tensor();
        const int peer = op->inputs()[0]->location().rank, tag = tags.at(op);
        task.name += " (receive from rank " + std::to_string(peer) + ")";
        task.run = [transfer, out, peer, tag] { transfer->start_recv(*out, peer, tag); };
      }
      task.poll = [transfer] { return transfer->done(); };
      dispatch::TaskId id = plan.add_task(std::move(task));
      task_of[op] = id;
      if (op->type() == "mpi_allreduce") {
        // Collectives must start in the same order on every rank: serialize them.
        if (collectives < 0) collectives = plan.add_resource("mpi:collectives");
        plan.use_resource(id, collectives);
      }
      continue;
    }
    task.executor = thread_of(op->location(), op->thread());
    auto binding = std::make_shared<OpBinding>();
    binding->kernel = &op->kernel();
    for (Blob* b : op->inputs()) binding->inputs.push_back(&b->tensor());
    for (Blob* b : op->outputs()) binding->outputs.push_back(&b->tensor());
    if (op->kernel().uses_rng()) {
      auto& rng = rngs_[op->location()];
      if (!rng) rng = std::make_unique<Rng>(location_seed(options_.seed, op->location()));
      binding->context.rng = rng.get();
    }
    if (views.count(op)) {
      // Its outputs are views of its inputs (or the reverse): nothing to compute. The task
      // stays, so that readers still wait for the writers on the other side.
    } else if (op->type() == "copy") {
      task.run = [binding] { CopyOp::copy(*binding->inputs[0], *binding->outputs[0]); };
    } else {
      task.run = [binding] {
        binding->kernel->compute(binding->inputs, binding->outputs, binding->context);
      };
    }
    dispatch::TaskId id = plan.add_task(std::move(task));
    task_of[op] = id;
    if (op->kernel().uses_rng()) {
      auto res = rng_resources.find(op->location());
      if (res == rng_resources.end())
        res = rng_resources
                  .emplace(op->location(), plan.add_resource("rng@" + op->location().to_string()))
                  .first;
      plan.use_resource(id, res->second);
    }
  }
  // Dependencies: every writer of an input before the reader; the writers of an accumulating
  // blob one after another, in creation order. Writers on other ranks are reached through the
  // receive task of the copy that brings their value here.
  for (const auto& [op, id] : task_of) {
    for (const Blob* in : op->inputs())
      for (const Op* w : in->writers()) {
        auto it = task_of.find(w);
        if (it != task_of.end()) plan.add_dependency(it->second, id);
      }
  }
  for (const auto& b : graph_.blobs()) {
    const auto& writers = b->writers();
    for (size_t i = 1; i < writers.size(); ++i) {
      auto a = task_of.find(writers[i - 1]), c = task_of.find(writers[i]);
      if (a != task_of.end() && c != task_of.end()) plan.add_dependency(a->second, c->second);
    }
  }
  // The serial engine runs tasks on the caller's thread: bound its compute threads too.
  if (options_.mode == dispatch::Mode::kSerial) set_compute_threads(threads);
  dispatch::EngineOptions engine_options;
  engine_options.mode = options_.mode;
  engine_options.stall_timeout = options_.stall_timeout;
  engine_ = std::make_unique<dispatch::Engine>(std::move(plan), engine_options);
}

Runnable::~Runnable() {
  engine_.reset();  // its transfers use the communicator
}

void Runnable::run_async() { engine_->run_async(); }

void Runnable::sync() {
  engine_->sync();
  for (auto& [a, b] : graph_.swaps()) {
    if (a->location().rank == options_.rank) a->tensor().swap_memory(b->tensor());
  }
}

void Runnable::add_observer(dispatch::Observer* observer) { engine_->add_observer(observer); }

std::map<std::string, std::string> Runnable::rng_states() const {
  std::map<std::string, std::string> states;
  for (const auto& [location, rng] : rngs_) states[location.to_string()] = rng->state();
  return states;
}

void Runnable::set_rng_states(const std::map<std::string, std::string>& states) {
  std::map<Rng*, Rng> restored;  // checked in full before any generator changes
  for (const auto& [location, state] : states) {
    Rng* rng = nullptr;
    for (const auto& [l, r] : rngs_)
      if (l.to_string() == location) rng = r.get();
    require(rng != nullptr, "random generator state for ", location,
            ": this rank has no random ops there");
    restored[rng].set_state(state);
  }
  for (auto& [rng, state] : restored) *rng = state;
}

int Runnable::num_tasks() const { return static_cast<int>(engine_->plan().tasks().size()); }

}  // namespace purine
