#include "purine/runnable.hpp"

#include <mpi.h>

#include <algorithm>

#include "base/error.hpp"
#include "operators/communicator.hpp"
#include "operators/compute_threads.hpp"
#include "purine/compile.hpp"
#include "purine/internal/device_graphs.hpp"
#include "purine/mpi.hpp"

namespace purine {

namespace {

int mpi_tag_upper_bound() {
  if (!mpi_initialized()) return 32767;
  int* value = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found);
  return found && value ? *value : 32767;
}

void check_world(const Graph& graph, const RunOptions& options) {
  // Started by mpirun but alone, or told another world than MPI's: every rank would run its own
  // copy without a word (TrainOptions and RunOptions take their rank and size from MPI when they
  // are made, so options made before the MpiContext say a world of one).
  const char* fix =
      "create a purine::MpiContext first thing in main() (purine/mpi.hpp), before building "
      "TrainOptions or RunOptions, whose rank and world size come from it";
  if (!mpi_initialized()) {
    const LaunchedWorld launched = mpi_launched_world();
    require(launched.size == 0 || launched.size == 1, "this process was started by mpirun (",
            launched.variable, ", rank ", launched.rank,
            ") but never initialized MPI, so every rank would run graph '", graph.name(),
            "' alone: ", fix);
  } else {
    const int world_rank = mpi_world_rank(), world_size = mpi_world_size();
    // A world of one on rank 0 runs rank 0's graph alone (the other ranks have none).
    require(
        options.rank == world_rank && (options.world_size == world_size || options.world_size == 1),
        "this process is rank ", world_rank, " of ", world_size, " MPI ranks, but graph '",
        graph.name(), "' is run as rank ", options.rank, " of ", options.world_size, ": ", fix,
        " (or set their rank and ranks to the world's)");
  }
  const int max_rank = graph_ranks(graph) - 1;
  // Under mpirun without an MpiContext every process thinks it is alone: say what is missing,
  // not to launch what was launched.
  require(max_rank == 0 || options.world_size > 1 || mpi_initialized(), "graph '", graph.name(),
          "' spans ", max_rank + 1, " ranks, but MPI was never initialized in this process: ",
          "create a purine::MpiContext at the top of main() (purine/mpi.hpp), then launch with ",
          "mpirun -np ", max_rank + 1);
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

}  // namespace

std::string device_graphs_refusal(const Graph& graph, int rank, dispatch::Mode mode,
                                  bool compiled) {
  const std::string refusal = DeviceGraphs::refusal(graph, rank, compiled);
  if (refusal.empty() && mode == dispatch::Mode::kSerial)
    return "the serial executor launches op by op";
  return refusal;
}

Runnable::Runnable(Graph& graph, RunOptions options) : graph_(graph), options_(options) {
  graph_.validate();
  check_world(graph_, options_);
  // Collective over every rank: they all build the same graph in the same order.
  if (graph_ranks(graph_) > 1) comm_ = duplicate_world_communicator();
  CompileOptions compile_options;
  compile_options.rank = options_.rank;
  compile_options.compute_threads = options_.compute_threads;
  compile_options.seed = options_.seed;
  compile_options.single_mpi_thread = !mpi_thread_multiple();
  compile_options.tag_upper_bound = mpi_tag_upper_bound();
  compile_options.comm = comm_.get();
  compile_options.reuse_memory = options_.reuse_memory;
  compile_options.observed = options_.observed;
  CompiledGraph compiled = compile(graph_, compile_options);
  rngs_ = std::move(compiled.generators);
  memory_ = std::move(compiled.memory);
  // The serial engine runs tasks on the caller's thread: bound its compute threads too.
  if (options_.mode == dispatch::Mode::kSerial)
    set_compute_threads(compiled.compute_threads_per_location);
  dispatch::EngineOptions engine_options;
  engine_options.mode = options_.mode;
  engine_options.stall_timeout = options_.stall_timeout;
  if (options_.device_graphs) {
    device_graphs_refusal_ = device_graphs_refusal(graph_, options_.rank, options_.mode);
    if (device_graphs_refusal_.empty())
      device_graphs_ =
          std::make_unique<DeviceGraphs>(graph_, options_.rank, compiled.plan, engine_options,
                                         options_.eager_runs, options_.run_ahead);
  }
  engine_ = std::make_unique<dispatch::Engine>(std::move(compiled.plan), engine_options);
}

Runnable::~Runnable() {
  device_graphs_.reset();
  engine_.reset();  // its transfers use the communicator
}

void Runnable::run_async() {
  if (!parameters_checked_) check_parameters_initialized();
  parameters_checked_ = true;
  replaying_ = device_graphs_ && device_graphs_->start_run(completed_runs_);
  if (!replaying_) engine_->run_async();
}

void Runnable::check_parameters_initialized() const {
  for (const Parameter& p : graph_.parameters()) {
    if (p.blob->location().rank != options_.rank) continue;
    // A parameter whose filler starts it at zero may well be all zeros.
    if (p.filler == "fill_constant" && p.filler_attrs.get_float("value", 0.0) == 0.0) continue;
    const std::vector<float> values = p.blob->tensor().values();  // from any location
    if (std::any_of(values.begin(), values.end(), [](float v) { return v != 0.0f; })) continue;
    throw Error(str("parameter '", p.blob->name(), "' of graph '", graph_.name(),
                    "' is all zeros, but its filler is ", p.filler,
                    ": it was never initialized; call initialize_parameters() (graphs/"
                    "initialize.hpp) or load a checkpoint before the first run"));
  }
}

void Runnable::sync() {
  if (replaying_)
    device_graphs_->sync();
  else
    engine_->sync();
  ++completed_runs_;
  for (auto& [a, b] : graph_.swaps()) {
    if (a->location().rank == options_.rank) a->tensor().swap_memory(b->tensor());
  }
}

void Runnable::add_observer(dispatch::Observer* observer) {
  engine_->add_observer(observer);
  if (device_graphs_) device_graphs_->add_observer(observer);
}

std::string Runnable::device_graphs_state() const {
  if (!options_.device_graphs) return "off (not asked)";
  if (!device_graphs_) return "off: " + device_graphs_refusal_;
  if (!device_graphs_->on()) return "off: " + device_graphs_->off_reason();
  const int operations = device_graphs_->operations_per_replay();
  std::string ahead;
  if (options_.run_ahead) {
    const DeviceGraphs& d = *device_graphs_;
    ahead = d.running_ahead()            ? str(", run ahead: ", d.launched_ahead(),
                                               " launched before the one before had run")
            : !d.ahead_refusal().empty() ? ", run ahead off: " + d.ahead_refusal()
                                         : std::string(", run ahead off: observed (traced)");
  }
  return str("on: ", device_graphs_->recordings(), " recording",
             device_graphs_->recordings() == 1 ? "" : "s",
             operations >= 0 ? str(" of ", operations, " device operations") : std::string(), ", ",
             device_graphs_->replays(), " replayed run", device_graphs_->replays() == 1 ? "" : "s",
             ahead);
}

int64_t Runnable::replayed_runs() const { return device_graphs_ ? device_graphs_->replays() : 0; }

bool Runnable::run_in_flight() const { return device_graphs_ && device_graphs_->in_flight(); }

void Runnable::drain() {
  if (device_graphs_) device_graphs_->drain();
}

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
