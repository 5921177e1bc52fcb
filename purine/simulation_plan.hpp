// SimulationPlan: the dispatcher plan of a whole global graph, every rank's tasks in one plan,
// built without tensors, for the discrete-event simulation of training (dispatcher/
// simulator.hpp; train/simulation.hpp gives the tasks their durations). The tasks, executors
// and dependencies follow compile()'s rules (purine/compile.cpp) rank by rank, so that rank r's
// part is the plan compile() makes on rank r (tests/purine/test_simulation_plan.cpp compares
// them):
//   - one executor per (location, thread name) of each rank, named "<location>/<thread>";
//     Graph::kAnyThread runs on its location's main thread (compile() lets it float);
//   - an op joining two ranks is two tasks: its send, on the sending rank at the location of the
//     blob it sends, and its receive, on the receiving rank; the receive depends on the send
//     (the transfer, which the cost model puts on the send);
//   - a copy from a GPU to its host runs on the GPU's thread;
//   - within a rank: every writer of an input before its reader, Graph::add_order, the writers
//     of an accumulating blob in creation order, one resource per location's random generator,
//     and one per rank for the ops every rank starts in one order (collectives);
//   - with SimulationPlanOptions::memory_orders, the memory plan's order edges of each rank
//     (CompileOptions::reuse_memory: memory_plan_orders() of purine/compile.hpp).
// Not modelled: a single MPI thread (CompileOptions::single_mpi_thread), and which views
// compile() makes (a reshape, or a split or concat along an axis with only 1s before it, is
// taken as a view that computes nothing).
// Tasks have no run(): the plan is for the simulator, not for an Engine. GPU executors are
// kCpuThread ones (no device queue is made; the simulator does not look at kinds).
// A value type; the graph must outlive it (tasks point to its ops).
#pragma once

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "base/location.hpp"
#include "dispatcher/plan.hpp"
#include "purine/graph.hpp"

namespace purine {

struct SimulatedTask {
  enum Role {
    kCompute,  // an op of one location
    kCopy,     // a copy between two locations of one rank (host <-> GPU, GPU <-> GPU, CPUs)
    kSend,     // the sending half of a copy between ranks: carries the transfer
    kReceive,  // its receiving half
  };
  const Op* op = nullptr;
  Role role = kCompute;
  Location at;        // where it runs
  bool view = false;  // compile() makes it a view: nothing to compute
};

struct SimulationPlan {
  dispatch::Plan plan;
  std::vector<SimulatedTask> tasks;         // per task of the plan
  std::vector<Location> executor_location;  // per executor
  std::vector<int> executor_rank;           // per executor
  int ranks = 1;
};

struct SimulationPlanOptions {
  // Per rank: the order edges of its memory plan, memory_plan_orders() (purine/compile.hpp), as
  // compile() with reuse_memory adds them; a rank without an entry gets none.
  std::map<int, std::vector<std::pair<const Op*, const Op*>>> memory_orders;
};

// The graph must have passed Graph::validate().
SimulationPlan build_simulation_plan(const Graph& graph, const SimulationPlanOptions& options = {});

// The tasks of `ranks` that a device graph (a CUDA graph, RunOptions::device_graphs) would hold,
// in the plan's deterministic order: dispatch::find_device_region over the plan, its GPU
// executors counting as device queues. Give the ranks whose runs record
// (device_graphs_refusal() of purine/runnable.hpp is empty): such a rank has no transfer to
// another, so its part of the region is the region of its own plan.
std::vector<dispatch::TaskId> device_graph_tasks(const SimulationPlan& sp,
                                                 const std::set<int>& ranks);

}  // namespace purine
