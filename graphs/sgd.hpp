// The optimizer graph: stochastic gradient descent with momentum and weight decay, or Adam or
// AdamW, built from ordinary graph ops. For every parameter with a gradient it adds an
// "sgd_update" op (operators/sgd_update.hpp) writing a new weight and momentum history, or an
// "adam_update" op (operators/adam_update.hpp) writing a new weight and first and second
// moments; the graph swaps them in after each run, so one run of the training graph is one
// step (graphs/fusion.hpp's fuse_updates may then join a GPU's SGD, or Adam, updates into one op).
// The learning rate, and for Adam the step number, are scalar blobs per location that the trainer
// sets before each run (from an LrSchedule and its iteration count): host blobs, one per CPU
// location and one per rank for its GPUs, each of which reads a copy made on its stream.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "purine/autodiff.hpp"
#include "purine/graph.hpp"
#include "purine/mpi.hpp"

namespace purine {

enum class Optimizer { kSgd, kAdam, kAdamW };

struct SgdOptions {
  double momentum = 0.9;      // kSgd
  double weight_decay = 0.0;  // scaled per parameter by Parameter::decay_mult
  Optimizer optimizer = Optimizer::kSgd;
  double beta1 = 0.9;  // kAdam, kAdamW
  double beta2 = 0.999;
  double eps = 1e-8;
};

// The names of the state tensors the optimizer keeps per weight, "<weight>::<name>":
// {"history"} for SGD, {"adam_m", "adam_v"} for Adam and AdamW.
std::vector<std::string> optimizer_states(const SgdOptions& options);

class SgdGraph {
 public:
  // Writes `lr` into the learning-rate blobs of this process's rank (call between runs; host
  // memory only, so it never waits for a device).
  void set_learning_rate(double lr, int rank = mpi_world_rank());
  // The host blobs set_learning_rate() writes, by location (a CPU location of each rank).
  const std::map<Location, Blob*>& learning_rate_blobs() const { return lr_; }
  // The learning rate as read at `location`: its host blob, or at a GPU its copy there, both
  // created on first use.
  Blob* learning_rate(Graph& graph, Location location);
  // Adam's step number: writes `step` (1 for the first update) into the step blobs of `rank`.
  void set_step(int64_t step, int rank = mpi_world_rank());
  // The step number as read at `location`, as learning_rate().
  Blob* step(Graph& graph, Location location);
  // The host blobs set_step() writes, by location.
  const std::map<Location, Blob*>& step_blobs() const { return step_; }

 private:
  std::map<Location, Blob*> lr_;    // by host location
  std::map<Location, Blob*> step_;  // likewise
};

SgdGraph add_sgd(Graph& graph, const Gradients& gradients, const SgdOptions& options);

// The update of one parameter: its optimizer states "<weight>::<name>" (optimizer_states), an
// "sgd_update" or "adam_update" op writing "<weight>::updated" (returned) and the states'
// swaps. Swapping the weight itself is left to the caller, who may first send the new weight
// elsewhere. `lr` (and, for Adam, `sgd`'s step blob) are scalars at the weight's location.
Blob* add_sgd_update(Graph& graph, const Parameter& parameter, Blob* grad, Blob* lr,
                     const SgdOptions& options, SgdGraph* sgd = nullptr);
void check_sgd_options(const SgdOptions& options);

}  // namespace purine
