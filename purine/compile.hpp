// The compile step: a validated Graph and a rank in, what the dispatcher runs out. compile()
// decides which ops this rank runs (its own, plus the send half of every copy leaving it), binds
// each to its tensors (allocating this rank's blobs, after making zero-copy views where the
// operators' aliasing traits allow, purine/internal/views.hpp, and with reuse_memory sharing
// memory between blobs never needed at once, purine/internal/memory_plan.hpp), maps each op's
// (location, thread) to an executor, gives cross-rank ops their MPI tags (from the graph's names,
// so all ranks agree), gives each location with random ops a generator (a resource serializing its
// users), and adds the dependencies: every writer of an input before its reader, the writers of an
// accumulating blob in creation order. Operators are known only by their traits and their
// asynchronous form (operators/operator.hpp): an op with an AsyncWork becomes a task that starts it
// and polls it. Each bound op's prepare() runs here, in the graph's order. It starts no thread and,
// but for what an op's prepare() does (an NCCL communicator's set-up on GPUs), makes no MPI call,
// so tests can inspect any rank's plan.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "base/rng.hpp"
#include "dispatcher/plan.hpp"
#include "purine/graph.hpp"

namespace purine {

struct CompileOptions {
  int rank = 0;  // the rank whose part is compiled
  // Threads each compute executor may use inside kernels, shared evenly among the rank's CPU
  // locations (at least one each).
  int compute_threads = 1;
  uint64_t seed = 1;  // seeds the generators, one stream per location
  // Without MPI_THREAD_MULTIPLE one thread makes every MPI call: communicating ops then run on
  // the rank's "mpi" executor instead of their own thread.
  bool single_mpi_thread = false;
  int tag_upper_bound = 32767;  // MPI_TAG_UB of the communicator
  // Handed to communicating ops (null: MPI_COMM_WORLD); must outlive the plan's runs.
  const Communicator* comm = nullptr;
  // Lets blobs whose values are never needed at the same time share memory (the memory plan:
  // purine/internal/memory_plan.hpp); off, every blob has memory of its own.
  bool reuse_memory = false;
  // Blobs the caller reads after a run (a loss): they keep memory of their own.
  std::set<const Blob*> observed{};
};

// What compile allocated for one location's blobs (those without memory before compile; not
// the parameters initialized before, for example).
struct MemoryUse {
  int64_t blob_bytes = 0;       // their storages, each once (views share their root's)
  int64_t allocated_bytes = 0;  // the buffers allocated for them: blob_bytes without reuse
  int buffers = 0;
};

struct MemoryPlan {
  std::map<Location, MemoryUse> by_location;  // this rank's locations
  // Blobs whose memory a blob written later in the run reuses: after a run they hold that
  // blob's values, not their own.
  std::set<const Blob*> overwritten;
};

struct CompiledGraph {
  dispatch::Plan plan;  // its tasks own their bindings (kernel, tensors, context, async work)
  std::map<const Op*, dispatch::TaskId> tasks;  // the ops this rank runs
  std::map<const Op*, PeerLink> links;          // the cross-rank halves among them
  // One per location with random ops; the plan's tasks point to them.
  std::map<Location, std::unique_ptr<Rng>> generators;
  int compute_threads_per_location = 1;
  MemoryPlan memory;
};

// Throws purine::Error when a cross-rank op cannot be given a tag (more copies between two ranks
// than tags); the graph must have passed Graph::validate().
CompiledGraph compile(Graph& graph, const CompileOptions& options);

// The order edges compile() adds to the plan of each rank for its memory plan with
// reuse_memory and `observed`: per rank, (before, after) pairs of ops whose tasks on that rank
// it orders, so that a shared buffer is free when written. Made as compile() makes them (its
// views, then the plan), without memory: for a graph that will not be compiled (a simulation,
// purine/simulation_plan.hpp). It gives the blobs deferred tensors and makes the views.
std::map<int, std::vector<std::pair<const Op*, const Op*>>> memory_plan_orders(
    Graph& graph, const std::set<const Blob*>& observed);

// The number of ranks a graph spans: 1 + the largest rank of any vertex.
int graph_ranks(const Graph& graph);

}  // namespace purine
