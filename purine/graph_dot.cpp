// Graph::to_dot: the bi-graph as a GraphViz picture in the style of the Purine paper.
#include <map>
#include <set>
#include <sstream>

#include "base/error.hpp"
#include "purine/graph.hpp"

namespace purine {

namespace {

const char* role_name(OpRole role) {
  switch (role) {
    case OpRole::kForward:
      return "forward";
    case OpRole::kBackward:
      return "backward";
    case OpRole::kOptimizer:
      return "optimizer";
    case OpRole::kCommunication:
      return "communication";
    case OpRole::kMonitor:
      return "monitor";
  }
  return "";
}

// Fill colours by role: light blue, orange, green, violet.
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

// A copy moves data between locations whatever pass it serves: drawn as communication.
OpRole drawn_role(const Op& op) {
  return op.kernel().traits().bridges_locations ? OpRole::kCommunication : op.role();
}

// The last two parts of a scoped name ("fc1::weight" of "mlp::fc1::weight").
std::string short_name(const std::string& name) {
  size_t cut = name.rfind("::");
  if (cut == std::string::npos || cut < 2) return name;
  const size_t before = name.rfind("::", cut - 1);
  return before == std::string::npos ? name : name.substr(before + 2);
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\\\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

std::string Graph::to_dot(const DotOptions& options) const {
  // The node each op is drawn as: its own, or with `collapse` its layer's for its role and
  // location.
  std::vector<std::string> layers;
  for (const auto& c : composites_)
    if (!c->nested()) layers.push_back(c->name());
  struct Node {
    std::string label;
    OpRole role;
    Location location;
  };
  std::map<std::string, Node> nodes;
  std::map<const Op*, std::string> node_of;
  for (const auto& op : ops_) {
    if (options.forward_only && op->role() != OpRole::kForward) continue;
    if (options.collapse && op->role() == OpRole::kMonitor) continue;
    const OpRole role = drawn_role(*op);
    std::string layer;
    if (options.collapse)
      for (const std::string& l : layers)
        if (op->name().compare(0, l.size() + 2, l + "::") == 0 && l.size() > layer.size())
          layer = l;
    std::string id = op->name(), label = op->type();
    if (!layer.empty() && role != OpRole::kCommunication) {
      id = str(layer, "|", role_name(role), "|", op->location());
      label = str(short_name(layer), role == OpRole::kForward ? "" : str("\\n", role_name(role)));
    } else if (op->thread() != kMainThread) {
      label += "\\n@" + op->thread();
    }
    nodes.emplace(id, Node{label, role, op->location()});
    node_of[op.get()] = id;
  }
  // Tensors drawn: those touched by a drawn op, unless every op touching it is in one layer's
  // nodes at one location (its activations, gradients and updated weights inside it).
  auto layer_and_location = [](const std::string& id) {
    const size_t first = id.find('|'), last = id.rfind('|');
    // Collapsed nodes' ids hold '|' (op names cannot: scopes join with "::").
    return first == std::string::npos ? id : id.substr(0, first) + id.substr(last);
  };
  std::set<const Blob*> drawn;
  for (const auto& b : blobs_) {
    std::set<std::string> touching;
    for (const Op* op : b->writers())
      if (node_of.count(op)) touching.insert(node_of[op]);
    for (const Op* op : b->readers())
      if (node_of.count(op)) touching.insert(node_of[op]);
    std::set<std::string> groups;
    for (const std::string& id : touching) groups.insert(layer_and_location(id));
    const bool inside_one = groups.size() == 1 && touching.begin()->find('|') != std::string::npos;
    if (!touching.empty() && !inside_one) drawn.insert(b.get());
  }

  std::ostringstream out;
  out << "digraph " << quoted(name_) << " {\n  rankdir=TB;\n  node [fontsize=10];\n";
  std::map<Location, std::vector<std::string>> clusters;
  for (const auto& b : blobs_)
    if (drawn.count(b.get()))
      clusters[b->location()].push_back(
          str(quoted(b->name()),
              " [shape=box, label=", quoted(short_name(b->name()) + "\\n" + b->shape().to_string()),
              ", tooltip=", quoted(b->name()), "];"));
  for (const auto& [id, node] : nodes)
    clusters[node.location].push_back(
        str(quoted(id), " [shape=circle, style=filled, fillcolor=", quoted(role_colour(node.role)),
            ", label=", quoted(node.label), ", tooltip=", quoted(id), "];"));
  int cluster = 0;
  for (const auto& [location, lines] : clusters) {
    out << "  subgraph cluster_" << cluster++ << " {\n    label=" << quoted(location.to_string())
        << ";\n";
    for (const auto& line : lines) out << "    " << line << "\n";
    out << "  }\n";
  }
  std::set<std::pair<std::string, std::string>> edges;  // collapsed nodes share edges
  for (const auto& op : ops_) {
    auto it = node_of.find(op.get());
    if (it == node_of.end()) continue;
    for (const Blob* b : op->inputs())
      if (drawn.count(b)) edges.emplace(b->name(), it->second);
    for (const Blob* b : op->outputs())
      if (drawn.count(b)) edges.emplace(it->second, b->name());
  }
  for (const auto& [from, to] : edges) out << "  " << quoted(from) << " -> " << quoted(to) << ";\n";
  // A swap: after each run the new tensor's memory becomes the old one's (weights, states).
  for (const auto& [a, b] : swaps_) {
    if (!drawn.count(b)) continue;
    std::string target = a->name();
    if (!drawn.count(a)) {  // the old tensor is inside a collapsed node: point at that node
      target.clear();
      for (const Op* reader : a->readers())
        if (node_of.count(reader)) target = node_of[reader];
      if (target.empty()) continue;
    }
    out << "  " << quoted(b->name()) << " -> " << quoted(target)
        << " [style=dashed, label=\"swap\", constraint=false];\n";
  }
  out << "}\n";
  return out.str();
}

}  // namespace purine
