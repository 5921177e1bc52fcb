// Runnable: a Graph compiled for one process (one MPI rank) into a dispatcher Plan
// (purine/compile.hpp) and run by an Engine. Construction validates the graph and the MPI
// world, then compiles: it allocates the tensors of this rank's blobs and creates one executor per
// (location, thread) of this rank's ops. The Runnable keeps the engine, the communicator and the
// random generators. run() is one run of the graph
// (for a training graph, one SGD step); after each successful run the graph's swaps exchange
// new and old parameters. The Graph must outlive the Runnable and must not change after it is
// built. Not thread-safe: drive it from one thread.
//
// Usage:
//   Graph g("net");
//   Blob* x = g.add_blob("x", {8, 4});
//   Blob* y = g.apply("relu", "relu", {}, {x})[0];
//   Runnable runnable(g);  // validated, compiled; every blob of this rank has its tensor
//   x->tensor().fill(-1.0f);
//   runnable.run();        // every op of this rank once; throws purine::Error naming a failed op
//   y->tensor().values();  // eight zeros
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "base/rng.hpp"
#include "dispatcher/engine.hpp"
#include "purine/compile.hpp"
#include "purine/graph.hpp"
#include "purine/mpi.hpp"

namespace purine {

class Communicator;  // operators/communicator.hpp
class DeviceGraphs;  // purine/internal/device_graphs.hpp

struct RunOptions {
  dispatch::Mode mode = dispatch::Mode::kParallel;
  // This process's MPI rank: only vertices located here are instantiated and run. A graph on
  // several ranks must span exactly 0 .. world_size-1; one on rank 0 alone runs in any world.
  int rank = mpi_world_rank();
  int world_size = mpi_world_size();
  // Threads each compute executor may use inside kernels (OpenMP, BLAS). With several CPU
  // locations on this rank, each location's executors get an even share (at least one).
  int compute_threads = 1;
  // Seeds the random generators, one per location (serialized by the dispatcher).
  uint64_t seed = 1;
  // A run in which no op finishes for this long fails, naming the ops still waiting.
  std::chrono::milliseconds stall_timeout{60000};
  // Blobs never needed at the same time share memory (CompileOptions::reuse_memory); read only
  // `observed` blobs, and the parameters, after a run. The plan is made when a graph is first
  // compiled: a later Runnable of the same graph keeps its memory as it was given.
  bool reuse_memory = false;
  std::set<const Blob*> observed{};
  // Device graphs (a CUDA graph per memory layout; purine/internal/device_graphs.hpp): after
  // `eager_runs` runs launched op by op, this rank's GPU work that waits for no host work is
  // recorded once and each later run launches it with one call. Refused (runs go on op by op;
  // device_graphs_state() says why) for a rank without GPU ops or with ops at several GPUs, ops
  // that communicate, and GPU ops that draw random numbers at launch.
  bool device_graphs = false;
  int eager_runs = 2;
  // With device graphs: a replayed run's sync() returns once its host tasks are done and the
  // replay is launched, not run; the next run launches its replay behind it, and its host tasks
  // wait for it (purine/internal/device_graphs.hpp). After sync() the blobs a replay writes may
  // still change until the next run's sync() or drain(): what the host reads or writes between
  // runs must alternate between two blobs (Graph::add_swap), as the trainer's do.
  bool run_ahead = false;
};

// Why a Runnable of `graph` on `rank` in `mode` launches its runs op by op although
// RunOptions::device_graphs asks for recordings ("" when it records them, once its plan has a
// device region: dispatch::find_device_region): the Runnable's own rule. With `compiled` false
// the graph has no memory yet (a simulation): see DeviceGraphs::refusal.
std::string device_graphs_refusal(const Graph& graph, int rank, dispatch::Mode mode,
                                  bool compiled = true);

class Runnable {
 public:
  explicit Runnable(Graph& graph, RunOptions options = {});
  ~Runnable();
  Runnable(const Runnable&) = delete;
  Runnable& operator=(const Runnable&) = delete;

  // The first run throws purine::Error naming a parameter of this rank that is all zeros while
  // its filler would not make it so: one never initialized (graphs/initialize.hpp).
  void run_async();
  // Waits for the run; rethrows an op's failure as purine::Error naming the op. Then applies
  // the graph's swaps (only after a successful run).
  void sync();
  void run() {
    run_async();
    sync();
  }
  // RunOptions::run_ahead: whether the last run's device work may still be running, and a wait
  // until it has run (anything that reads its results must wait first). Throws purine::Error if
  // the device failed.
  bool run_in_flight() const;
  void drain();

  void add_observer(dispatch::Observer* observer);
  Graph& graph() const { return graph_; }
  const RunOptions& options() const { return options_; }
  // Number of ops this rank runs.
  int num_tasks() const;
  // The memory compile allocated for this rank's blobs, and which ones share it.
  const MemoryPlan& memory() const { return memory_; }
  // The state of this rank's random generators (one per location with random ops), keyed by
  // location, for checkpoints; between runs only. set_rng_states throws purine::Error naming a
  // location this rank has no generator for, or a bad state, and then changes nothing.
  std::map<std::string, std::string> rng_states() const;
  void set_rng_states(const std::map<std::string, std::string>& states);
  // RunOptions::device_graphs: "off (not asked)", "off: <why>", or "on: <n> recordings of <k>
  // device operations, <m> replayed runs" (k: QueueGraph::operations(), left out where
  // unknown), then with RunOptions::run_ahead ", run ahead: <j> launched before the one before
  // had run" or ", run ahead off: <why>".
  std::string device_graphs_state() const;
  // Runs started by replaying a recording.
  int64_t replayed_runs() const;

 private:
  Graph& graph_;
  RunOptions options_;
  std::map<Location, std::unique_ptr<Rng>> rngs_;
  MemoryPlan memory_;
  // A communicator of its own (a duplicate of MPI_COMM_WORLD) for a graph on several ranks, so
  // that no message of another Runnable, or of an earlier failed run of one, can match ours.
  // Released (not freed: see operators/mpi/communicator.hpp) after the engine.
  std::shared_ptr<Communicator> comm_;
  std::unique_ptr<dispatch::Engine> engine_;
  std::unique_ptr<DeviceGraphs> device_graphs_;  // with RunOptions::device_graphs
  std::string device_graphs_refusal_;            // why device_graphs_ is null when asked
  int completed_runs_ = 0;
  bool replaying_ = false;  // the run in progress replays
  // The first run checks that every parameter of this rank was initialized (a forgotten
  // initialize_parameters() would otherwise train from zeros without a word).
  void check_parameters_initialized() const;
  bool parameters_checked_ = false;
};

}  // namespace purine
