// What a graph picture (purine/graph_dot.hpp) shows, before it is written as GraphViz text: the
// vertices (operators as circles, tensors as boxes), the edges and what each is, and which
// vertices share a rank. Built from a Graph that nobody changes meanwhile; plain values, no state.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "purine/graph.hpp"

namespace purine::dot {

enum class EdgeKind {
  kData,      // the forward data flow and the updates: drawn left to right
  kBackward,  // the backward pass's gradients: drawn right to left (written reversed, dir=back)
  kSide,      // a forward tensor a backward op reads: thin and grey, no say in the layout
  kSwap,      // a new value that takes a tensor's place after each run: dashed
};

struct Vertex {
  std::string id;
  std::string label;
  std::string tooltip;
  bool op = false;
  OpRole role = OpRole::kForward;    // an op's role as drawn (copies: communication)
  bool group = false;                // a communication group of several ops
  bool weights = false;              // a tensor box of a layer's parameters
  bool gradient = false;             // a tensor box of gradients
  std::optional<Location> location;  // its location's cluster; none: between locations
  std::string layer;                 // the layer it belongs to (a full name), "" none
};

struct Edge {
  std::string from;
  std::string to;
  EdgeKind kind = EdgeKind::kData;
};

struct Drawing {
  std::vector<Vertex> vertices;
  std::vector<Edge> edges;
  // Groups of vertex ids drawn at one rank: a layer's forward and backward at one location.
  std::vector<std::vector<std::string>> same_rank;
};

// Collapsed: the ops of one layer with one role at one location are one circle; the
// communication ops connected by data (a bucket's reduction, a copy chain) one group, labelled by
// what they do and the layers whose tensors they carry; a layer's parameters one box, their
// gradients another, with the update cycle (weights -> forward, backward -> gradients -> update
// -> weights); tensors inside one layer, the new weights and the optimizer's scalars not drawn.
// Expanded: every op and every tensor it touches. `forward_only`: the forward ops alone.
Drawing collapsed_drawing(const Graph& graph, bool forward_only);
Drawing expanded_drawing(const Graph& graph, bool forward_only);

}  // namespace purine::dot
