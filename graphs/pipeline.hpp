// Pipeline (inter-layer) parallelism as placement: a sequential model is cut into S stages of
// consecutive layers, each stage built at its own location (a CPU location of this process, a
// GPU, or an MPI rank), without changing the model's code (Graph::place). Activations cross
// from stage to stage by the copies the builder inserts, and their gradients come back by the
// copies autodiff adds (purine/autodiff.hpp), so one run of the graph is one forward and
// backward pass of the whole batch through the stages; the weights stay at their stage, where
// the optimizer updates them.
//
// Stages are cut by layers with parameters: with P of them and S stages, the k-th parametric
// layer goes to stage floor(k*S/P), and every layer without parameters (an activation, a
// pooling) goes with the layer before it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/location.hpp"
#include "purine/graph.hpp"

namespace purine {

// One block of a model, as Graph::layer_names() lists it.
struct ModelLayer {
  std::string name;        // full name in the graph it was found in ("mlp::fc1")
  int64_t parameters = 0;  // elements of its parameters
};

// The layers of the model that `build` puts into an empty scratch graph (set up to the end),
// in order.
std::vector<ModelLayer> model_layers(const std::function<void(Graph&)>& build);

// The stage of every layer for `stages` stages (see above). Throws purine::Error, naming
// `model` and its layers, when stages < 1 or the model has fewer layers with parameters.
std::vector<int> assign_stages(const std::vector<ModelLayer>& layers, int stages,
                               const std::string& model);

// Places layer i at locations[stage_of[i]] in `graph` (Graph::place: composites created later
// under that name, in any scope, are built there).
void place_stages(Graph& graph, const std::vector<ModelLayer>& layers,
                  const std::vector<int>& stage_of, const std::vector<Location>& locations);

}  // namespace purine
