// Names for graph pictures (purine/graph_dot.hpp): what a gradient blob is the gradient of, read
// from autodiff's naming (purine/autodiff.cpp), and the short labels a picture shows. Functions
// without state; thread-safe for a graph nobody changes meanwhile.
#pragma once

#include <string>
#include <vector>

#include "purine/graph.hpp"

namespace purine::dot {

// The blob that `b` is (a part of) the gradient of, or nullptr when `b` is no gradient. Autodiff
// names the gradient of input i of op O "O::grad::in<i>", the sum of a blob B's several
// gradients "B::grad" (and its partial sums "B::partial<k>"), a missing output gradient
// "B::zero_grad::value"; a copy of a gradient to another location is the gradient of the same.
const Blob* gradient_of(const Graph& graph, const Blob* b);

// The last two scopes of a name joined by '.': "conv1.weight" for "replica0::lenet::conv1::weight"
// (a copy's "@<location>" suffix dropped).
std::string short_label(const std::string& name);
// A tensor's name in a picture: "<layer>.<name>" for one inside a layer ("inception_3a.top" for
// "replica0::googlenet::inception_3a::concat::top"), its last scope when its scope holds layers
// ("images" for "replica0::images"), else short_label.
std::string tensor_name(const std::string& name, const std::vector<std::string>& layers);
// The last scope of a name: "conv1" for "replica0::lenet::conv1".
std::string last_scope(const std::string& name);
// The longest of `layers` that `name` is inside of (the layer itself or under "layer::"); "" when
// none is.
std::string layer_of(const std::string& name, const std::vector<std::string>& layers);
// The names joined by ", ", or the first and the last with the count when there are more than
// `most`: "inception_3a ... inception_4e (7)".
std::string name_list(const std::vector<std::string>& names, size_t most = 3);

}  // namespace purine::dot
