// Graph pictures as GraphViz text (purine/graph_dot.hpp): the drawing (purine/internal/
// dot_drawing.hpp) written out with its layout attributes.
#include "purine/graph_dot.hpp"

#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "base/error.hpp"
#include "purine/internal/dot_drawing.hpp"

namespace purine {

namespace {

// Fill colours by role: light blue, orange, green, violet, grey.
const char* role_colour(OpRole role) {
  switch (role) {
    case OpRole::kForward:
      return "#cfe2f3";
    case OpRole::kBackward:
      return "#fce5cd";
    case OpRole::kOptimizer:
      return "#d9ead3";
    case OpRole::kCommunication:
      return "#e4d7f5";
    case OpRole::kMonitor:
      return "#eeeeee";
  }
  return "white";
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\\\"") : std::string(1, c);
  return out + "\"";
}

std::string vertex_line(const dot::Vertex& v) {
  std::string style;
  if (v.op)
    style = str("shape=", v.group ? "ellipse" : "circle",
                ", style=filled, fillcolor=", quoted(role_colour(v.role)));
  else if (v.weights)
    style = "shape=box, style=filled, fillcolor=\"#fff2cc\"";
  else if (v.gradient)
    style = "shape=box, style=filled, fillcolor=\"#fdf1e4\", color=\"#b45f06\"";
  else
    style = "shape=box";
  return str(quoted(v.id), " [", style, ", label=", quoted(v.label),
             ", tooltip=", quoted(v.tooltip), "];");
}

// The layers of each location in the order of their first vertex, numbered from 0.
std::map<std::string, int> layer_columns(const dot::Drawing& d, const Location& at) {
  std::map<std::string, int> column;
  for (const dot::Vertex& v : d.vertices)
    if (v.location == at && !v.layer.empty() && !column.count(v.layer)) {
      const int next = static_cast<int>(column.size());
      column[v.layer] = next;
    }
  return column;
}

}  // namespace

std::string draw_dot(const Graph& graph, const DotPicture& picture) {
  require(picture.dpi > 0, "a picture needs a positive dpi, got ", picture.dpi);
  const dot::Drawing d = picture.collapse ? dot::collapsed_drawing(graph, picture.forward_only)
                                          : dot::expanded_drawing(graph, picture.forward_only);
  std::map<Location, std::vector<const dot::Vertex*>> clusters;
  std::vector<const dot::Vertex*> between;  // communication between locations
  for (const dot::Vertex& v : d.vertices) {
    if (v.location)
      clusters[*v.location].push_back(&v);
    else
      between.push_back(&v);
  }
  // Bands: a location's layers cut into runs drawn one under another.
  std::map<std::string, std::string> band_of;  // vertex id -> "<cluster>_<band>"
  std::map<Location, int> bands;
  for (const auto& [at, vertices] : clusters) {
    const std::map<std::string, int> column = layer_columns(d, at);
    // Widths in layers: one with weights has a column of boxes more.
    std::vector<double> width(std::max<size_t>(1, column.size()), 1.0);
    for (const dot::Vertex* v : vertices)
      if (v->weights && column.count(v->layer)) width[column.at(v->layer)] = 1.6;
    double total = 0;
    for (double w : width) total += w;
    int count = 1;
    if (picture.band_layers > 0) {
      count = (static_cast<int>(width.size()) + picture.band_layers - 1) / picture.band_layers;
    } else if (picture.collapse) {
      // A layer is about 2.6 inches wide and a band 4.2 inches tall per location: about 1.6
      // wide to 1 tall needs sqrt(width * 2.6 / (1.6 * 4.2 * locations)) bands.
      count = std::max(1, static_cast<int>(std::lround(std::sqrt(
                              total * 2.6 / (1.6 * 4.2 * static_cast<double>(clusters.size()))))));
    }
    // Layer i goes to the band its middle falls in, so that the bands are about as wide.
    std::vector<int> band(width.size());
    double before = 0;
    for (size_t i = 0; i < width.size(); ++i) {
      band[i] =
          picture.band_layers > 0
              ? static_cast<int>(i) / picture.band_layers
              : std::min(count - 1, static_cast<int>((before + width[i] / 2) / total * count));
      before += width[i];
    }
    bands[at] = count;
    for (const dot::Vertex* v : vertices)
      band_of[v->id] =
          str(at.to_string(), "_",
              v->layer.empty() || !column.count(v->layer) ? 0 : band[column.at(v->layer)]);
  }

  std::ostringstream out;
  out << "digraph " << quoted(graph.name()) << " {\n"
      << "  rankdir=LR;\n  ranksep=0.2;\n  nodesep=0.12;\n  dpi=" << picture.dpi << ";\n";
  if (!picture.size.empty()) out << "  size=" << quoted(picture.size) << ";\n";
  out << "  fontname=\"Helvetica\";\n  fontsize=11;\n  labelloc=b;\n"
      << "  label=\"circles: operators (blue forward, orange backward, green update, violet "
         "communication)\\n"
         "boxes: tensors (yellow weights, orange gradients); forward runs left to "
         "right, backward right to left; dashed: the new value replaces the tensor after each "
         "run\";\n"
      << "  node [fontname=\"Helvetica\", fontsize=9, margin=\"0.03,0.02\"];\n"
      << "  edge [arrowsize=0.5, penwidth=0.8];\n";
  int cluster = 0;
  for (const auto& [at, vertices] : clusters) {
    const int number = cluster++;
    out << "  subgraph cluster_" << number << " {\n    label=" << quoted(at.to_string())
        << ";\n    style=rounded;\n    color=\"#999999\";\n";
    std::map<std::string, std::vector<const dot::Vertex*>> by_band;
    for (const dot::Vertex* v : vertices) by_band[band_of[v->id]].push_back(v);
    for (const auto& [band, members] : by_band) {
      const bool own = bands[at] > 1;
      const std::string indent = own ? "      " : "    ";
      if (own)
        out << "    subgraph cluster_" << number << "_" << band.substr(band.rfind('_') + 1)
            << " {\n      label=\"\";\n      peripheries=0;\n";
      std::set<std::string> ids;
      for (const dot::Vertex* v : members) {
        out << indent << vertex_line(*v) << "\n";
        ids.insert(v->id);
      }
      for (const auto& group : d.same_rank) {
        bool all = true;
        for (const std::string& id : group) all = all && ids.count(id);
        if (!all) continue;
        // In one rank, the invisible edge puts the forward above the backward.
        out << indent << "{ rank=same;";
        for (const std::string& id : group) out << " " << quoted(id) << ";";
        for (size_t k = 1; k < group.size(); ++k)
          out << " " << quoted(group[k]) << " -> " << quoted(group[k - 1]) << " [style=invis];";
        out << " }\n";
      }
      if (own) out << "    }\n";
    }
    out << "  }\n";
  }
  for (const dot::Vertex* v : between) out << "  " << vertex_line(*v) << "\n";
  for (const dot::Edge& e : d.edges) {
    const bool crosses =
        band_of.count(e.from) && band_of.count(e.to) && band_of[e.from] != band_of[e.to];
    std::string attrs;
    switch (e.kind) {
      case dot::EdgeKind::kData:
        break;
      case dot::EdgeKind::kBackward:
        attrs = "dir=back, color=\"#b45f06\"";
        break;
      case dot::EdgeKind::kSide:
        attrs = "color=\"#bbbbbb\", constraint=false";
        break;
      case dot::EdgeKind::kSwap:
        // No "swap" label: the legend says what the dashed edges are (an expanded picture has
        // one per weight and optimizer state).
        attrs = "style=dashed, color=\"#38761d\", constraint=false";
        break;
    }
    if (crosses && attrs.find("constraint") == std::string::npos)
      attrs += std::string(attrs.empty() ? "" : ", ") + "constraint=false";
    // A backward edge is written from its head to its tail, so that the layout ranks it as a
    // forward one and the backward pass runs right to left.
    const bool reversed = e.kind == dot::EdgeKind::kBackward;
    out << "  " << quoted(reversed ? e.to : e.from) << " -> " << quoted(reversed ? e.from : e.to)
        << (attrs.empty() ? "" : " [" + attrs + "]") << ";\n";
  }
  out << "}\n";
  return out.str();
}

std::string Graph::to_dot(const DotOptions& options) const {
  DotPicture picture;
  picture.collapse = options.collapse;
  picture.forward_only = options.forward_only;
  return draw_dot(*this, picture);
}

}  // namespace purine
