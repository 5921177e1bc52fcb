// The optimizer graph: stochastic gradient descent with momentum and weight decay, built from
// ordinary graph ops. For every parameter with a gradient it adds an "sgd_update" op writing a
// new weight and momentum history; the graph swaps them in after each run, so one run of the
// training graph is one SGD step. The learning rate is a scalar blob per location that the
// trainer sets before each run (from an LrSchedule).
#pragma once

#include <map>

#include "purine/autodiff.hpp"
#include "purine/graph.hpp"

namespace purine {

struct SgdOptions {
  double momentum = 0.9;
  double weight_decay = 0.0;  // scaled per parameter by Parameter::decay_mult
};

class SgdGraph {
 public:
  // Writes `lr` into every learning-rate blob (call between runs).
  void set_learning_rate(double lr);
  const std::map<Location, Blob*>& learning_rate_blobs() const { return lr_; }

 private:
  friend SgdGraph add_sgd(Graph&, const Gradients&, const SgdOptions&);
  std::map<Location, Blob*> lr_;
};

SgdGraph add_sgd(Graph& graph, const Gradients& gradients, const SgdOptions& options);

}  // namespace purine
