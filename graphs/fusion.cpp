#include "graphs/fusion.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "base/error.hpp"
#include "operators/attrs.hpp"

namespace purine {

namespace {

// The op writing `blob`, when it is the only writer, of type `type`, and `reader` is the blob's
// only reader; else null.
Op* sole_link(const Blob* blob, const char* type, const Op* reader) {
  if (blob->writers().size() != 1 || blob->readers().size() != 1 || blob->readers()[0] != reader ||
      blob->accumulating())
    return nullptr;
  Op* writer = blob->writers()[0];
  return writer->type() == type ? writer : nullptr;
}

bool same_place(const Op* a, const Op* b) {
  return a->location() == b->location() && a->thread() == b->thread() && a->role() == b->role();
}

// The scope of an op's full name ("a::b::conv" -> "a::b::"; "" at top level).
std::string scope_of(const std::string& name) {
  const size_t at = name.rfind("::");
  return at == std::string::npos ? "" : name.substr(0, at + 2);
}

// The ops in an order (Graph::add_order), which fusions leave alone, and the relus to try, once
// the graph is set up.
struct Candidates {
  std::set<const Op*> ordered;
  std::vector<Op*> relus;
};

Candidates candidates(Graph& graph) {
  graph.validate();  // sets up every pending composite: all readers are in the graph
  Candidates c;
  for (const auto& op : graph.ops()) {
    for (const Op* before : op->ordered_after()) {
      c.ordered.insert(before);
      c.ordered.insert(op.get());
    }
    if (op->type() == "relu" && op->inputs().size() == 1 && op->outputs().size() == 1)
      c.relus.push_back(op.get());
  }
  return c;
}

// The scope of the op that stands for sibling convolutions: their own scopes joined by "+" under
// the scope they share (inception_4a::1x1::conv_bias_relu and
// inception_4a::3x3_reduce::conv_bias_relu -> "inception_4a::1x1+3x3_reduce").
std::string siblings_scope(const std::vector<Op*>& ops) {
  std::string shared = scope_of(ops[0]->name());
  for (const Op* op : ops)
    while (!shared.empty() && op->name().compare(0, shared.size(), shared) != 0)
      shared = scope_of(shared.substr(0, shared.size() - 2));
  const std::string suffix = "::conv_bias_relu";
  std::string scope = shared;
  for (const Op* op : ops) {
    std::string own = op->name().substr(shared.size());
    if (own.size() > suffix.size() &&
        own.compare(own.size() - suffix.size(), suffix.size(), suffix) == 0)
      own.resize(own.size() - suffix.size());
    scope += (op == ops[0] ? "" : "+") + own;
  }
  return scope;
}

// The update ops fuse_updates joins: per weight `tensors` inputs (the weight, its gradient, its
// states), then `scalars` inputs shared by all weights.
struct UpdateForm {
  size_t tensors, scalars;
};
const UpdateForm* update_form(const std::string& type) {
  static const UpdateForm sgd{3, 1}, adam{4, 2};
  return type == "sgd_update" ? &sgd : type == "adam_update" ? &adam : nullptr;
}

// Fuses every op of `type` that `qualifies` and whose first output a "relu" alone reads, at one
// place with it, neither in an order, the blob between them held by nothing else: one op of type
// `fused` of its inputs and attributes, writing the relu's output where it wrote that blob (and
// its other outputs), named "<its scope>::<fused>". Returns how many.
template <typename Qualifies>
int fuse_with_relu(Graph& graph, const char* type, const char* fused, Qualifies qualifies) {
  const Candidates c = candidates(graph);
  int count = 0;
  for (Op* relu : c.relus) {
    Blob* between = relu->inputs()[0];
    Op* op = sole_link(between, type, relu);
    if (!op || op->outputs()[0] != between || !qualifies(op) || !same_place(op, relu)) continue;
    if (c.ordered.count(op) || c.ordered.count(relu) || graph.held_outside_ops(between)) continue;
    std::vector<Blob*> outputs = op->outputs();
    outputs[0] = relu->outputs()[0];
    graph.replace_ops({op, relu}, {between}, scope_of(op->name()) + fused, fused,
                      op->kernel().attrs(), op->inputs(), outputs);
    ++count;
  }
  return count;
}

}  // namespace

int fuse_conv_bias_relu(Graph& graph) {
  const Candidates c = candidates(graph);
  int fused = 0;
  for (Op* relu : c.relus) {
    Blob* biased = relu->inputs()[0];
    Op* bias = sole_link(biased, "bias", relu);
    if (!bias || bias->inputs().size() != 2) continue;
    Blob* convolved = bias->inputs()[0];
    Op* conv = sole_link(convolved, "conv", bias);
    if (!conv || conv->inputs().size() != 2 || convolved == bias->inputs()[1]) continue;
    if (!same_place(conv, bias) || !same_place(bias, relu)) continue;
    if (c.ordered.count(conv) || c.ordered.count(bias) || c.ordered.count(relu)) continue;
    if (graph.held_outside_ops(convolved) || graph.held_outside_ops(biased)) continue;
    graph.replace_ops(
        {conv, bias, relu}, {convolved, biased}, scope_of(conv->name()) + "conv_bias_relu",
        "conv_bias_relu", conv->kernel().attrs(),
        {conv->inputs()[0], conv->inputs()[1], bias->inputs()[1]}, {relu->outputs()[0]});
    ++fused;
  }
  return fused;
}

int fuse_bias_relu(Graph& graph) {
  return fuse_with_relu(graph, "bias", "bias_relu",
                        [](const Op* bias) { return bias->inputs().size() == 2; });
}

int fuse_batch_norm_relu(Graph& graph) {
  return fuse_with_relu(graph, "batch_norm", "batch_norm_relu", [](const Op* bn) {
    return bn->inputs().size() == 5 && bn->outputs().size() == 5;
  });
}

int fuse_sum_relu(Graph& graph) {
  return fuse_with_relu(graph, "sum", "sum_relu",
                        [](const Op* sum) { return sum->location().is_cpu(); });
}

int fuse_relu_grad_sums(Graph& graph) {
  const Candidates c = candidates(graph);
  std::vector<Op*> grads;
  for (const auto& op : graph.ops())
    if (op->type() == "relu_grad" && op->inputs().size() == 2 && op->location().is_cpu())
      grads.push_back(op.get());
  int fused = 0;
  for (Op* grad : grads) {
    Blob* dy = grad->inputs()[1];
    Op* sum = sole_link(dy, "sum", grad);
    if (!sum || dy == grad->inputs()[0] || !same_place(sum, grad)) continue;
    if (c.ordered.count(sum) || c.ordered.count(grad) || graph.held_outside_ops(dy)) continue;
    std::vector<Blob*> inputs{grad->inputs()[0]};
    inputs.insert(inputs.end(), sum->inputs().begin(), sum->inputs().end());
    graph.replace_ops({grad, sum}, {dy}, grad->name(), "relu_grad", {}, inputs, grad->outputs());
    ++fused;
  }
  return fused;
}

int fuse_inner_product_bias(Graph& graph, bool gpus_only) {
  const Candidates c = candidates(graph);
  std::vector<Op*> biases;
  for (const auto& op : graph.ops())
    if ((op->type() == "bias" || op->type() == "bias_relu") && op->inputs().size() == 2 &&
        !(gpus_only && op->location().is_cpu()))
      biases.push_back(op.get());
  int fused = 0;
  for (Op* bias : biases) {
    Blob* product = bias->inputs()[0];
    Op* ip = sole_link(product, "inner_product", bias);
    if (!ip || ip->inputs().size() != 2 || product == bias->inputs()[1]) continue;
    if (!same_place(ip, bias) || c.ordered.count(ip) || c.ordered.count(bias)) continue;
    if (graph.held_outside_ops(product)) continue;
    Attrs attrs;
    attrs.set("relu", int64_t{bias->type() == "bias_relu" ? 1 : 0});
    graph.replace_ops({ip, bias}, {product}, scope_of(ip->name()) + "inner_product_bias",
                      "inner_product_bias", attrs,
                      {ip->inputs()[0], ip->inputs()[1], bias->inputs()[1]}, {bias->outputs()[0]});
    ++fused;
  }
  return fused;
}

int fuse_sibling_convolutions(Graph& graph) {
  const Candidates c = candidates(graph);
  // The conv_bias_relu ops that may be one, by input, place, attributes and kernel size, in the
  // ops' order. (Blobs by name: the groups' order, and so the new vertices' names, must not
  // follow addresses.)
  using Key = std::tuple<std::string, Location, std::string, OpRole,
                         std::map<std::string, AttrValue>, int64_t, int64_t>;
  std::map<Key, std::vector<Op*>> groups;
  for (const auto& op : graph.ops()) {
    if (op->type() != "conv_bias_relu" || op->inputs().size() != 3 || op->outputs().size() != 1 ||
        !op->location().is_cpu() || c.ordered.count(op.get()))
      continue;
    const Blob* x = op->inputs()[0];
    const Blob* y = op->outputs()[0];
    const Shape& w = op->inputs()[1]->shape();
    if (op->inputs()[1] == x || op->inputs()[2] == x || y->writers().size() != 1 ||
        y->accumulating() || w.ndim() != 4)
      continue;
    groups[{x->name(), op->location(), op->thread(), op->role(), op->kernel().attrs().values(),
            w[2], w[3]}]
        .push_back(op.get());
  }
  int fused = 0;
  for (const auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    std::vector<Blob*> weights, biases, tops;
    std::vector<int64_t> sizes;
    int64_t total = 0;
    for (const Op* op : members) {
      weights.push_back(op->inputs()[1]);
      biases.push_back(op->inputs()[2]);
      tops.push_back(op->outputs()[0]);
      sizes.push_back(op->inputs()[1]->shape()[0]);
      total += sizes.back();
    }
    std::vector<Blob*> released = weights;
    released.insert(released.end(), biases.begin(), biases.end());
    released.insert(released.end(), tops.begin(), tops.end());
    const Shape& y = tops[0]->shape();
    Graph::Scope scope(graph, siblings_scope(members), /*absolute=*/true);
    Graph::Placement at(graph, members[0]->location(), members[0]->thread());
    Graph::RoleScope role(graph, members[0]->role());
    const Attrs rows = Attrs().set("axis", int64_t{0});
    Blob* weight = graph.apply("weight::concat", "concat", rows, weights, {"weight"})[0];
    Blob* bias = graph.apply("bias::concat", "concat", rows, biases, {"bias"})[0];
    Blob* top = graph.add_blob("top", Shape{y[0], total, y[2], y[3]});
    graph.replace_ops(members, {}, graph.full_name("conv_bias_relu"), "conv_bias_relu",
                      members[0]->kernel().attrs(), {members[0]->inputs()[0], weight, bias}, {top},
                      released);
    Op* split = graph.add_op("split", "split", Attrs().set("axis", int64_t{1}).set("sizes", sizes));
    graph.set_inputs(split, {top});
    graph.set_outputs(split, tops);
    ++fused;
  }
  return fused;
}

int fuse_forward(Graph& graph, bool siblings) {
  return fuse_conv_bias_relu(graph) + fuse_bias_relu(graph) + fuse_batch_norm_relu(graph) +
         fuse_sum_relu(graph) + fuse_inner_product_bias(graph, /*gpus_only=*/true) +
         (siblings ? fuse_sibling_convolutions(graph) : 0);
}

std::vector<Blob*> count_in_updates(Graph& graph, const std::vector<Blob*>& weights,
                                    std::vector<Blob*>* uncounted) {
  const Candidates c = candidates(graph);
  std::vector<Blob*> counts;
  for (Blob* weight : weights) {
    Op* update = weight->writers().size() == 1 ? weight->writers()[0] : nullptr;
    const UpdateForm* form = update ? update_form(update->type()) : nullptr;
    // One weight's update (its outputs: the weight, then its states), at a CPU location.
    if (!form || !update->location().is_cpu() || update->location() != weight->location() ||
        update->inputs().size() != form->tensors + form->scalars ||
        update->outputs().size() != form->tensors - 1 || update->outputs()[0] != weight ||
        c.ordered.count(update)) {
      uncounted->push_back(weight);
      continue;
    }
    Graph::Placement at(graph, update->location(), update->thread());
    Blob* count = graph.add_blob(update->name() + "::non_finite", Shape{});
    std::vector<Blob*> outputs = update->outputs();
    outputs.push_back(count);
    Attrs attrs = update->kernel().attrs();
    attrs.set("count_non_finite", 1);
    graph.replace_ops({update}, {}, update->name(), update->type(), attrs, update->inputs(),
                      outputs);
    counts.push_back(count);
  }
  return counts;
}

int fuse_updates(Graph& graph, bool gpus_only) {
  const Candidates c = candidates(graph);
  // The updates that may be one op, by place, type, attributes and scalar inputs (the learning
  // rate; Adam's step), in creation order.
  // (Blobs by name: the groups' order, and so the fused ops' names, must not follow addresses.)
  using Key = std::tuple<Location, std::string, std::string, std::map<std::string, AttrValue>,
                         std::vector<std::string>>;
  std::map<Key, std::vector<Op*>> groups;
  for (const auto& op : graph.ops()) {
    const UpdateForm* form = update_form(op->type());
    if (!form || op->inputs().size() != form->tensors + form->scalars ||
        c.ordered.count(op.get()) || op->role() != OpRole::kOptimizer ||
        (gpus_only && op->location().is_cpu()))
      continue;
    const Blob* grad = op->inputs()[1];
    const bool local = !grad->writers().empty() &&
                       std::all_of(grad->writers().begin(), grad->writers().end(),
                                   [](const Op* w) { return w->role() == OpRole::kBackward; });
    if (!local) continue;  // a reduced gradient: its update follows its reduction
    std::vector<std::string> scalars;
    for (auto it = op->inputs().end() - form->scalars; it != op->inputs().end(); ++it)
      scalars.push_back((*it)->name());
    groups[{op->location(), op->thread(), op->type(), op->kernel().attrs().values(), scalars}]
        .push_back(op.get());
  }
  std::map<Location, int> made;  // fused updates per location, for their names
  int fused = 0;
  for (const auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    const size_t tensors = update_form(members[0]->type())->tensors;
    std::vector<Blob*> inputs, outputs;
    for (const Op* op : members) {
      inputs.insert(inputs.end(), op->inputs().begin(), op->inputs().begin() + tensors);
      outputs.insert(outputs.end(), op->outputs().begin(), op->outputs().end());
    }
    inputs.insert(inputs.end(), members[0]->inputs().begin() + tensors, members[0]->inputs().end());
    // The new op takes chain[0]'s place among the ops: the last update's, after every input.
    std::vector<Op*> chain(members.rbegin(), members.rend());
    const Location at = std::get<0>(key);
    graph.replace_ops(chain, {}, str("sgd::update", made[at]++, "@", at.to_string()),
                      members[0]->type(), members[0]->kernel().attrs(), inputs, outputs);
    fused += static_cast<int>(members.size());
  }
  return fused;
}

}  // namespace purine
