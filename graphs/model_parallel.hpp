// Model (intra-layer) parallelism as a rule on the graph, like placement: the layers named are
// built split over several locations (graphs/layers.hpp, LinearLayer), without changing the
// model's code. Inner products and convolutions can be split, by outputs or by inputs; an
// element-wise layer between two split layers works on the slices where they are. Their
// parameters keep their single-device names in checkpoints, so a checkpoint moves between
// split and unsplit layouts, and initialization gives every layout the same weights.
#pragma once

#include <string>
#include <vector>

#include "base/location.hpp"
#include "purine/graph.hpp"

namespace purine {

// Splits the layers named (matched as Graph::place matches names) over `locations`. An entry
// may give its axis, "conv1:batch", "fc1:outputs" or "fc2:inputs"; the axes of the others
// alternate in list order, the first by outputs, the next by inputs, ... For two consecutive
// layers with an activation between them (an MLP block) this is the Megatron pattern: the input
// is sent to every location, each computes its slice of the hidden layer and a partial output,
// and one sum per pass (of the partial outputs forward, of the input's gradients backward)
// joins them. Convolutions by batch and fully connected layers by outputs and inputs is the
// "one weird trick" hybrid (Krizhevsky, 2014): the convolutions' weights travel, the large
// fully connected weights stay, their inputs travel instead. Throws purine::Error on an empty
// list of layers or of locations, a location listed twice or an unknown axis; a layer with
// fewer outputs, inputs or images than locations is refused, naming it, when it is built.
void model_parallel(Graph& graph, const std::vector<std::string>& layers,
                    const std::vector<Location>& locations);

// The layer an entry of model_parallel's list names ("conv1" for "conv1:batch"; a name may
// carry its scope: "googlenet::inception_4a" for "googlenet::inception_4a:batch").
std::string split_layer_name(const std::string& entry);

}  // namespace purine
