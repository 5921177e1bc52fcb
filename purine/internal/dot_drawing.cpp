#include "purine/internal/dot_drawing.hpp"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include "base/error.hpp"
#include "purine/internal/dot_names.hpp"

namespace purine::dot {

namespace {

// A copy moves data between locations whatever pass it serves: drawn as communication.
OpRole drawn_role(const Op& op) {
  return op.kernel().traits().bridges_locations ? OpRole::kCommunication : op.role();
}

bool is_copy(const Op& op) { return op.kernel().traits().bridges_locations; }

std::string with_shape(const std::string& label, const Blob& b) {
  return label + "\\n" + b.shape().to_string();
}

// "d conv1.weight" for a gradient, "conv1.top" for any other tensor.
std::string tensor_label(const Graph& g, const Blob& b, const std::vector<std::string>& layers) {
  const Blob* of = gradient_of(g, &b);
  return of ? "d " + tensor_name(of->name(), layers) : tensor_name(b.name(), layers);
}

bool made_by_backward(const Graph& g, const Blob& b) {
  for (const Op* w : b.writers())
    if (w->role() == OpRole::kBackward) return true;
  return gradient_of(g, &b) != nullptr;
}

// Scalars only the optimizer reads (the learning rate, Adam's step), and their copies: inputs of
// every update alike, left out of collapsed pictures.
class OptimizerScalars {
 public:
  bool operator()(const Blob* b) {
    auto it = memo_.find(b);
    if (it != memo_.end()) return it->second;
    return memo_[b] = b->shape().count() == 1 && from_nothing(b) && to_optimizer(b);
  }

 private:
  static bool from_nothing(const Blob* b) {
    for (const Op* w : b->writers())
      if (!is_copy(*w) || w->inputs().size() != 1 || !from_nothing(w->inputs()[0])) return false;
    return true;
  }
  static bool to_optimizer(const Blob* b) {
    if (b->readers().empty()) return false;
    for (const Op* r : b->readers()) {
      if (r->role() == OpRole::kOptimizer && !is_copy(*r)) continue;
      if (!is_copy(*r) || r->outputs().size() != 1 || !to_optimizer(r->outputs()[0])) return false;
    }
    return true;
  }
  std::map<const Blob*, bool> memo_;
};

// Union-find over op indices.
struct Components {
  explicit Components(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  size_t find(size_t i) { return parent[i] == i ? i : parent[i] = find(parent[i]); }
  void join(size_t a, size_t b) { parent[find(a)] = find(b); }
  std::vector<size_t> parent;
};

// The role in a collapsed circle's id: "conv1|backward|rank0:cpu".
const char* role_id(OpRole role) {
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

// The role as a circle's label says it ("conv1\nbackward"); forward circles say none.
std::string role_word(OpRole role) {
  if (role == OpRole::kForward) return "";
  if (role == OpRole::kOptimizer) return "update";
  return role_id(role);
}

std::string values_text(int64_t n) {
  if (n >= 1000000) return str(std::round(n / 1e5) / 10.0, "M values");
  if (n >= 1000) return str(std::round(n / 1e2) / 10.0, "k values");
  return str(n, " values");
}

// The scope the names share (whole scopes only), "" when none.
std::string common_scope(const std::vector<std::string>& names) {
  if (names.empty()) return "";
  std::string common = names[0];
  for (const std::string& n : names) {
    size_t k = 0;
    while (k < common.size() && k < n.size() && common[k] == n[k]) ++k;
    common.resize(k);
  }
  // Back to a whole scope: a name that continues with "::" after it, or is it.
  for (const std::string& n : names)
    while (!common.empty() &&
           !(n.size() == common.size() || n.compare(common.size(), 2, "::") == 0))
      common.resize(common.rfind("::") == std::string::npos ? 0 : common.rfind("::"));
  return common;
}

// A long op type on two lines, cut at the '_' nearest its middle, so that its circle stays small:
// "inner_product_grad_weight" reads "inner_product\ngrad_weight".
std::string two_lines(const std::string& type) {
  if (type.size() <= 12) return type;
  const long middle = static_cast<long>(type.size()) / 2;
  size_t cut = std::string::npos;
  for (size_t at = type.find('_'); at != std::string::npos; at = type.find('_', at + 1))
    if (cut == std::string::npos ||
        std::labs(static_cast<long>(at) - middle) < std::labs(static_cast<long>(cut) - middle))
      cut = at;
  return cut == std::string::npos ? type : type.substr(0, cut) + "\\n" + type.substr(cut + 1);
}

// An op drawn by itself: its type on two lines, an update of several parameters saying how
// many (graphs/fusion.hpp's fuse_updates), and its thread when not the main one.
std::string op_label(const Op& op) {
  std::string label = two_lines(op.type());
  // Per weight: sgd_update reads 3 tensors, adam_update 4; then 1 or 2 scalars.
  const size_t per_weight = op.type() == "sgd_update" ? 3 : op.type() == "adam_update" ? 4 : 0;
  if (per_weight > 0 && op.inputs().size() > per_weight + 2)
    label = str("update\\n", op.inputs().size() / per_weight, " parameters");
  return label + (op.thread() != Graph::kMainThread ? "\\n@" + op.thread() : "");
}

class Builder {
 public:
  Builder(const Graph& g, bool forward_only) : g_(g), layers_(g.layer_names()) {
    for (size_t i = 0; i < layers_.size(); ++i) layer_index_[layers_[i]] = static_cast<int>(i);
    for (const auto& op : g.ops()) {
      if (forward_only && op->role() != OpRole::kForward) continue;
      ops_.push_back(op.get());
    }
  }

  Drawing expanded() {
    for (const Parameter& p : g_.parameters()) parameters_.insert(p.blob);
    for (const Op* op : ops_) {
      node_of_[op] = op->name();
      Vertex v;
      v.id = op->name();
      v.op = true;
      v.role = drawn_role(*op);
      v.label = op_label(*op);
      v.tooltip = op->name();
      v.location = op->location();
      v.layer = layer_of(op->name(), layers_);
      add_vertex(v);
    }
    for (const Op* op : ops_)
      for (const auto* list : {&op->inputs(), &op->outputs()})
        for (const Blob* b : *list) {
          if (box_of_.count(b)) continue;
          box_of_[b] = b->name();
          Vertex v;
          v.id = b->name();
          v.label = with_shape(tensor_label(g_, *b, layers_), *b);
          v.tooltip = b->name();
          v.location = b->location();
          v.weights = parameters_.count(b) > 0;
          v.gradient = gradient_of(g_, b) != nullptr;
          add_vertex(v);
        }
    connect();
    for (const auto& [a, b] : g_.swaps())
      if (box_of_.count(a) && box_of_.count(b))
        drawing_.edges.push_back({box_of_[b], box_of_[a], EdgeKind::kSwap});
    inherit_layers();
    return std::move(drawing_);
  }

  Drawing collapsed() {
    OptimizerScalars scalar;
    // Ops that touch optimizer scalars alone (their copies) and monitors are left out.
    std::vector<const Op*> kept;
    for (const Op* op : ops_) {
      if (op->role() == OpRole::kMonitor) continue;
      bool all_scalar = true;
      for (const auto* list : {&op->inputs(), &op->outputs()})
        for (const Blob* b : *list) all_scalar = all_scalar && scalar(b);
      if (all_scalar && !op->inputs().empty()) continue;
      kept.push_back(op);
    }
    ops_ = kept;
    group_ops();
    std::map<const Blob*, size_t> order;  // parameters by registration
    for (const Parameter& p : g_.parameters()) {
      parameters_.insert(p.blob);
      order.emplace(p.blob, order.size());
    }
    std::map<const Blob*, const Blob*> replaces;  // a parameter's new value -> the parameter
    for (const auto& [a, b] : g_.swaps())
      if (parameters_.count(a)) replaces[b] = a;
    // Tensors.
    std::map<std::string, std::vector<const Blob*>> weights, gradients;  // by box id
    std::map<std::string, std::string> part_boxes;  // gradient parts' key -> their box
    std::map<std::string, int> part_count;          // box -> parts in it
    for (const Op* op : ops_)
      for (const auto* list : {&op->inputs(), &op->outputs()})
        for (const Blob* b : *list) {
          if (decided_.count(b)) continue;
          decided_.insert(b);
          if (scalar(b) || replaces.count(b)) continue;
          const std::string layer = layer_of(b->name(), layers_);
          const std::string at = b->location().to_string();
          if (parameters_.count(b) && !layer.empty()) {
            const std::string id = "weights|" + layer + "|" + at;
            box_of_[b] = id;
            weights[id].push_back(b);
            continue;
          }
          std::set<std::string> writers, readers;
          for (const Op* w : b->writers())
            if (node_of_.count(w)) writers.insert(node_of_[w]);
          for (const Op* r : b->readers())
            if (node_of_.count(r)) readers.insert(node_of_[r]);
          const Blob* of = gradient_of(g_, b);
          const bool to_update = std::any_of(readers.begin(), readers.end(), [&](auto& id) {
            return vertex_role(id) != OpRole::kBackward;
          });
          const bool by_backward = std::any_of(writers.begin(), writers.end(), [&](auto& id) {
            return vertex_role(id) == OpRole::kBackward;
          });
          if (of && parameters_.count(of) && by_backward && to_update && !layer.empty()) {
            const std::string grad_layer = layer_of(of->name(), layers_);
            const std::string id = "gradients|" + grad_layer + "|" + at;
            box_of_[b] = id;
            gradients[id].push_back(b);
            continue;
          }
          std::set<std::string> touching = writers;
          touching.insert(readers.begin(), readers.end());
          // A state the circle that reads it also renews (momentum, running statistics).
          if (const Blob* next = g_.swapped_with(b))
            for (const Op* w : next->writers())
              if (node_of_.count(w)) touching.insert(node_of_[w]);
          if (writers.empty() && g_.swapped_with(b) && touching.size() == 1) continue;
          if (!writers.empty() && touching.size() <= 1) continue;  // inside one circle
          if (!writers.empty() && inside_one_layer(touching)) continue;
          // Written by a communication group: its readers are joined to the group directly;
          // so is an update's output only communication reads (a shard of new weights).
          if (writers.size() == 1 && groups_.count(*writers.begin()) && !readers.empty()) {
            from_group_[b] = *writers.begin();
            continue;
          }
          if (writers.size() == 1 && vertex_role(*writers.begin()) == OpRole::kOptimizer &&
              !readers.empty() && std::all_of(readers.begin(), readers.end(), [&](auto& id) {
                return groups_.count(id) > 0;
              })) {
            from_group_[b] = *writers.begin();
            continue;
          }
          // Parts of one gradient between the same circles (an inception's branches) are one
          // box.
          std::string parts;
          if (of) {
            parts = str("parts|", of->name(), "|", at, "|");
            for (const std::string& id : writers) parts += id + ";";
            parts += "|";
            for (const std::string& id : readers) parts += id + ";";
            auto it = part_boxes.find(parts);
            if (it != part_boxes.end()) {
              box_of_[b] = it->second;
              ++part_count[it->second];
              continue;
            }
          }
          box_of_[b] = b->name();
          if (of) {
            part_boxes[parts] = b->name();
            part_count[b->name()] = 1;
          }
          Vertex v;
          v.id = b->name();
          v.label = with_shape(tensor_label(g_, *b, layers_), *b);
          v.tooltip = b->name();
          v.location = b->location();
          v.gradient = of != nullptr;
          add_vertex(v);
        }
    for (const auto& [id, count] : part_count)
      if (count > 1) drawing_.vertices[index_.at(id)].label += str("\\n(", count, " parts)");
    for (auto& [id, blobs] : gradients)
      std::stable_sort(blobs.begin(), blobs.end(), [&](const Blob* a, const Blob* b) {
        return order[gradient_of(g_, a)] < order[gradient_of(g_, b)];
      });
    for (auto* boxes : {&weights, &gradients})
      for (const auto& [id, blobs] : *boxes) {
        const bool grads = boxes == &gradients;
        Vertex v;
        v.id = id;
        v.location = blobs[0]->location();
        v.weights = !grads;
        v.gradient = grads;
        v.layer = id.substr(id.find('|') + 1, id.rfind('|') - id.find('|') - 1);
        std::string label, tooltip;
        int64_t values = 0;
        for (const Blob* b : blobs) {
          const std::string name =
              grads ? tensor_label(g_, *b, layers_) : tensor_name(b->name(), layers_);
          label += (label.empty() ? "" : "\\n") + name + " " + b->shape().to_string();
          tooltip += (tooltip.empty() ? "" : " ") + b->name();
          values += b->shape().count();
        }
        if (blobs.size() > 3) {
          const std::string layer = last_scope(v.layer);
          label = str(grads ? "d " : "", layer, ": ", blobs.size(),
                      grads ? " gradients" : " weights", "\\n", values_text(values));
        }
        v.label = label;
        v.tooltip = tooltip;
        add_vertex(v);
      }
    connect();
    // The update cycle: the new weights take the weights' place after each run.
    std::set<std::pair<std::string, std::string>> swaps;
    for (const auto& [a, b] : g_.swaps()) {
      if (!box_of_.count(a)) continue;
      if (box_of_.count(b)) {
        swaps.emplace(box_of_[b], box_of_[a]);
        continue;
      }
      for (const Op* w : b->writers())
        if (node_of_.count(w)) swaps.emplace(node_of_[w], box_of_[a]);
    }
    for (const auto& [from, to] : swaps) drawing_.edges.push_back({from, to, EdgeKind::kSwap});
    // A layer's forward and backward side by side.
    std::map<std::string, std::vector<std::string>> ranks;
    for (const Vertex& v : drawing_.vertices)
      if (v.op && !v.group && !v.layer.empty() &&
          (v.role == OpRole::kForward || v.role == OpRole::kBackward))
        ranks[v.layer + "|" + v.location->to_string()].push_back(v.id);
    for (auto& [key, ids] : ranks)
      if (ids.size() > 1) drawing_.same_rank.push_back(ids);
    inherit_layers();
    return std::move(drawing_);
  }

 private:
  void add_vertex(const Vertex& v) {
    index_[v.id] = drawing_.vertices.size();
    drawing_.vertices.push_back(v);
  }
  OpRole vertex_role(const std::string& id) const {
    auto it = index_.find(id);
    return it == index_.end() ? OpRole::kForward : drawing_.vertices[it->second].role;
  }

  // Whether every one of the circles is a layer's (not a group's, not a lone op's), of one
  // layer at one location.
  bool inside_one_layer(const std::set<std::string>& ids) const {
    std::set<std::string> keys;
    for (const std::string& id : ids) {
      const Vertex& v = drawing_.vertices[index_.at(id)];
      if (v.group || v.layer.empty() || id == v.layer) return false;
      if (id.find('|') == std::string::npos) return false;
      keys.insert(v.layer + "|" + v.location->to_string());
    }
    return keys.size() == 1;
  }

  // The circles of a collapsed picture: a layer's ops by role and location, the communication
  // ops by connected group, any other op alone.
  void group_ops() {
    std::map<const Op*, size_t> at;
    for (size_t i = 0; i < ops_.size(); ++i) at[ops_[i]] = i;
    Components comm(ops_.size());
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (drawn_role(*ops_[i]) != OpRole::kCommunication) continue;
      for (const Blob* b : ops_[i]->outputs())
        for (const Op* r : b->readers())
          if (at.count(r) && drawn_role(*r) == OpRole::kCommunication) comm.join(i, at[r]);
    }
    std::map<size_t, std::vector<const Op*>> groups;
    for (size_t i = 0; i < ops_.size(); ++i) {
      const Op* op = ops_[i];
      const OpRole role = drawn_role(*op);
      if (role == OpRole::kCommunication) {
        groups[comm.find(i)].push_back(op);
        continue;
      }
      const std::string layer = layer_of(op->name(), layers_);
      if (layer.empty()) {
        node_of_[op] = op->name();
        Vertex v;
        v.id = op->name();
        v.op = true;
        v.role = role;
        v.label = op_label(*op);
        v.tooltip = op->name();
        v.location = op->location();
        add_vertex(v);
        continue;
      }
      const std::string id = str(layer, "|", role_id(role), "|", op->location());
      node_of_[op] = id;
      if (index_.count(id)) continue;
      Vertex v;
      v.id = id;
      v.op = true;
      v.role = role;
      const std::string word = role_word(role);
      v.label = last_scope(layer) + (word.empty() ? "" : "\\n" + word);
      v.tooltip = str(layer, " (", word.empty() ? "forward" : word, " at ", op->location(), ")");
      v.location = op->location();
      v.layer = layer;
      add_vertex(v);
    }
    // Groups that do the same for the same layers (a sharded layer's weights, one group per
    // weight and rank; a synchronized batch norm's sums) are drawn as one, in their first
    // group's place.
    std::map<std::string, std::vector<const Op*>> by_label;
    std::vector<std::string> labels;
    for (const auto& [root, ops] : groups) {
      const std::string label = group_label(ops);
      if (!by_label.count(label)) labels.push_back(label);
      by_label[label].insert(by_label[label].end(), ops.begin(), ops.end());
    }
    int number = 0;
    for (const std::string& label : labels) {
      const std::vector<const Op*>& ops = by_label[label];
      const std::string id = str("communication|", number++);
      for (const Op* op : ops) node_of_[op] = id;
      Vertex v;
      v.id = id;
      v.op = true;
      v.role = OpRole::kCommunication;
      v.group = ops.size() > 1;
      v.label = label;
      v.tooltip = str(ops.size(), " ops: ", ops.front()->name(),
                      ops.size() > 1 ? " ... " + ops.back()->name() : std::string());
      std::set<Location> locations;
      for (const Op* op : ops) locations.insert(op->location());
      if (locations.size() == 1) v.location = *locations.begin();
      groups_.insert(id);
      add_vertex(v);
    }
  }

  // What a communication group does (the scope its ops share, else their types) and the layers
  // whose tensors come into it.
  std::string group_label(const std::vector<const Op*>& ops) const {
    std::set<const Op*> inside(ops.begin(), ops.end());
    std::vector<std::string> names, own_names;
    std::set<std::string> types;
    std::set<int> layers;
    std::set<std::string> others;
    for (const Op* op : ops) {
      names.push_back(op->name());
      if (!is_copy(*op)) {
        own_names.push_back(op->name());
        types.insert(op->type());
      }
      for (const Blob* b : op->inputs()) {
        bool from_inside = false;
        for (const Op* w : b->writers()) from_inside = from_inside || inside.count(w);
        if (from_inside) continue;
        const std::string layer = layer_of(b->name(), layers_);
        if (!layer.empty())
          layers.insert(layer_index_.at(layer));
        else
          others.insert(short_label(b->name()));
      }
    }
    std::vector<std::string> carried;
    std::set<std::string> seen;
    for (int i : layers)
      if (seen.insert(last_scope(layers_[i])).second) carried.push_back(last_scope(layers_[i]));
    if (carried.empty()) carried.assign(others.begin(), others.end());
    // What the group does: the scope its ops (but copies, named after what they copy) share, or
    // their types.
    std::string kind = last_scope(common_scope(own_names.empty() ? names : own_names));
    if (kind.empty() || kind.find('@') != std::string::npos ||
        std::find(carried.begin(), carried.end(), kind) != carried.end()) {
      kind.clear();
      for (const std::string& t : types) kind += (kind.empty() ? "" : "+") + t;
      if (kind.empty()) kind = "copy";
    }
    const std::string list = name_list(carried);
    return list.empty() ? kind : kind + "\\n" + list;
  }

  void connect() {
    std::set<std::tuple<std::string, std::string, EdgeKind>> edges;
    for (const Op* op : ops_) {
      auto it = node_of_.find(op);
      if (it == node_of_.end()) continue;
      const std::string& node = it->second;
      const bool backward = vertex_role(node) == OpRole::kBackward;
      for (const Blob* b : op->inputs()) {
        if (box_of_.count(b)) {
          const std::string& box = box_of_[b];
          const EdgeKind kind = !backward                  ? EdgeKind::kData
                                : made_by_backward(g_, *b) ? EdgeKind::kBackward
                                                           : EdgeKind::kSide;
          edges.emplace(box, node, kind);
        } else if (from_group_.count(b) && from_group_[b] != node) {
          edges.emplace(from_group_[b], node, EdgeKind::kData);
        }
      }
      for (const Blob* b : op->outputs())
        if (box_of_.count(b) && box_of_[b] != node)
          edges.emplace(
              node, box_of_[b],
              backward && made_by_backward(g_, *b) ? EdgeKind::kBackward : EdgeKind::kData);
    }
    for (const auto& [from, to, kind] : edges) drawing_.edges.push_back({from, to, kind});
  }

  // Tensors and lone ops take the layer of what writes them, else of what reads them, at their
  // location (for the bands of a picture).
  void inherit_layers() {
    // The writer first: its edges into the vertex, then the others.
    std::map<std::string, std::vector<std::string>> next;
    for (const Edge& e : drawing_.edges)
      if (e.kind != EdgeKind::kSwap && e.kind != EdgeKind::kSide) next[e.to].push_back(e.from);
    for (const Edge& e : drawing_.edges)
      if (e.kind != EdgeKind::kSwap) next[e.from].push_back(e.to);
    for (int pass = 0; pass < 3; ++pass)
      for (Vertex& v : drawing_.vertices) {
        if (!v.layer.empty() || !v.location) continue;
        for (const std::string& other : next[v.id]) {
          const Vertex& o = drawing_.vertices[index_.at(other)];
          if (!o.layer.empty() && o.location == v.location) {
            v.layer = o.layer;
            break;
          }
        }
      }
  }

  const Graph& g_;
  std::vector<std::string> layers_;
  std::map<std::string, int> layer_index_;
  std::vector<const Op*> ops_;
  std::set<const Blob*> parameters_;
  std::set<const Blob*> decided_;
  std::map<const Op*, std::string> node_of_;
  std::map<const Blob*, std::string> box_of_;
  std::map<const Blob*, std::string> from_group_;  // hidden tensors a group writes
  std::set<std::string> groups_;                   // communication vertices' ids
  std::map<std::string, size_t> index_;
  Drawing drawing_;
};

}  // namespace

Drawing collapsed_drawing(const Graph& graph, bool forward_only) {
  return Builder(graph, forward_only).collapsed();
}

Drawing expanded_drawing(const Graph& graph, bool forward_only) {
  return Builder(graph, forward_only).expanded();
}

}  // namespace purine::dot
