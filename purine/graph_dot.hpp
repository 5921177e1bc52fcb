// Pictures of a bi-graph as GraphViz text, in the style of the Purine paper: tensors as boxes,
// operators as circles coloured by role (forward blue, backward orange, update green,
// communication violet), one cluster per location. Laid out left to right: the forward pass
// runs left to right and the backward pass right to left beneath it, a layer's forward and
// backward circles in one column; a collapsed picture draws each layer's weights and gradients
// with the update cycle (weights -> forward; backward -> gradients -> update -> weights, the
// dashed edge being the swap after each run) and wraps a long chain of layers into bands. Pure
// functions of a graph nobody changes meanwhile.
//
//   DotPicture picture;      // collapsed, 96 dots per inch
//   picture.size = "16,10";  // at most 16 x 10 inches (Graphviz scales down, never up)
//   std::string text = draw_dot(graph, picture);  // `dot -Tpng` draws it
#pragma once

#include <string>

#include "purine/graph.hpp"

namespace purine {

struct DotPicture {
  // One circle per layer, role and location (Graph::DotOptions::collapse); false: every op.
  bool collapse = true;
  bool forward_only = false;  // the forward ops and their tensors alone
  // Graphviz's size: the largest drawing, "W,H" in inches ("" no limit).
  std::string size;
  int dpi = 96;  // dots per inch of a PNG (SVG is in points)
  // Layers per band of a location's chain; 0 chooses them so that a collapsed picture is about
  // 1.6 times as wide as tall. Expanded pictures are one band.
  int band_layers = 0;
};

std::string draw_dot(const Graph& graph, const DotPicture& picture);

}  // namespace purine
