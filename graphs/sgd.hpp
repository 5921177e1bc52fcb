// The optimizer graph: stochastic gradient descent with momentum and weight decay, built from
// ordinary graph ops. For every parameter with a gradient it adds an "sgd_update" op writing a
// new weight and momentum history; the graph swaps them in after each run, so one run of the
// training graph is one SGD step. The learning rate is a scalar blob per location that the
// trainer sets before each run (from an LrSchedule).
#pragma once

#include <map>

#include "purine/autodiff.hpp"
#include "purine/graph.hpp"
#include "purine/mpi.hpp"

namespace purine {

struct SgdOptions {
  double momentum = 0.9;
  double weight_decay = 0.0;  // scaled per parameter by Parameter::decay_mult
};

class SgdGraph {
 public:
  // Writes `lr` into the learning-rate blobs of this process's rank (call between runs).
  void set_learning_rate(double lr, int rank = mpi_world_rank());
  const std::map<Location, Blob*>& learning_rate_blobs() const { return lr_; }
  // The learning-rate blob at `location`, created on first use.
  Blob* learning_rate(Graph& graph, Location location);

 private:
  std::map<Location, Blob*> lr_;
};

SgdGraph add_sgd(Graph& graph, const Gradients& gradients, const SgdOptions& options);

// The update of one parameter: history state "<weight>::history", an "sgd_update" op writing
// "<weight>::updated" (returned) and the history swap. Swapping the weight itself is left to the
// caller, who may first send the new weight elsewhere. `lr` is a scalar at the weight's location.
Blob* add_sgd_update(Graph& graph, const Parameter& parameter, Blob* grad, Blob* lr,
                     const SgdOptions& options);
// A learning-rate blob "sgd::lr@<location>" for SgdGraph-like use.
Blob* add_learning_rate(Graph& graph, Location location);
void check_sgd_options(const SgdOptions& options);

}  // namespace purine
