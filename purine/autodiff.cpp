#include "purine/autodiff.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <set>

#include "base/error.hpp"
#include "operators/registry.hpp"

namespace purine {

Blob* Gradients::of(const Blob* blob) const {
  auto it = grads_.find(blob);
  require(it != grads_.end(), "no gradient for blob '", blob->name(),
          "': the loss does not depend on it");
  return it->second;
}

namespace {

class Builder {
 public:
  Builder(Graph& graph) : graph_(graph) {}

  // A blob of `shape` filled with `value` on every run (gradient seeds, absent gradients).
  Blob* constant(const std::string& name, const Shape& shape, double value, Location location,
                 const std::string& thread) {
    Graph::Scope scope(graph_, name, true);
    Graph::Placement placement(graph_, location, thread);
    Attrs attrs;
    attrs.set("shape", shape.dims()).set("value", value);
    return graph_.apply("fill", "fill_constant", attrs, {}, {"value"})[0];
  }

  // The finished gradient of `blob`: its single contribution, or their sum in the order of
  // the ops they come from (backward() visits those last to first).
  Blob* total(Blob* blob) {
    std::vector<Part> parts(contributions_[blob].rbegin(), contributions_[blob].rend());
    if (parts.empty()) return nullptr;
    if (parts.size() == 1) return parts[0].blob;
    auto it = summed_.find(blob);
    if (it != summed_.end()) return it->second;
    const Op* writer = blob->writers().empty() ? nullptr : blob->writers()[0];
    Graph::Scope scope(graph_, blob->name(), true);
    Graph::Placement placement(graph_, blob->location(),
                               writer ? writer->thread() : parts.back().thread);
    // A chain of two-input sums: the same floats as one n-input sum (which adds its inputs left
    // to right), but each part is dead once added, so its memory can serve the next (the memory
    // plan: purine/internal/memory_plan.hpp). The weight gradients of a pipeline's micro-batches
    // so take one buffer, not one each.
    Blob* sum = parts[0].blob;
    for (size_t i = 1; i < parts.size(); ++i) {
      const bool last = i + 1 == parts.size();
      sum = graph_.apply(last ? "grad_sum" : str("grad_partial", i), "sum", {},
                         {sum, parts[i].blob}, {last ? "grad" : str("partial", i)})[0];
    }
    summed_[blob] = sum;
    return sum;
  }

  void contribute(Blob* blob, Blob* grad, const std::string& thread) {
    contributions_[blob].push_back({grad, thread});
  }

 private:
  struct Part {
    Blob* blob;
    std::string thread;
  };
  Graph& graph_;
  std::map<const Blob*, std::vector<Part>> contributions_;
  std::map<const Blob*, Blob*> summed_;
};

std::set<const Blob*> reachable_forward(const std::vector<Blob*>& from) {
  std::set<const Blob*> seen(from.begin(), from.end());
  std::vector<const Blob*> stack(from.begin(), from.end());
  while (!stack.empty()) {
    const Blob* b = stack.back();
    stack.pop_back();
    for (const Op* r : b->readers())
      for (const Blob* out : r->outputs())
        if (seen.insert(out).second) stack.push_back(out);
  }
  return seen;
}

std::set<const Blob*> reachable_backward(const Blob* to) {
  std::set<const Blob*> seen{to};
  std::vector<const Blob*> stack{to};
  while (!stack.empty()) {
    const Blob* b = stack.back();
    stack.pop_back();
    for (const Op* w : b->writers())
      for (const Blob* in : w->inputs())
        if (seen.insert(in).second) stack.push_back(in);
  }
  return seen;
}

// Instantiates one op's GradientSpec.
void differentiate(Graph& graph, Builder& builder, const Op& op,
                   const std::set<const Blob*>& needs_grad) {
  const size_t n_in = op.inputs().size();
  std::vector<Blob*> out_grads;
  bool any = false;
  for (Blob* out : op.outputs()) {
    out_grads.push_back(builder.total(out));
    any |= out_grads.back() != nullptr;
  }
  if (!any) return;
  std::vector<bool> wanted(n_in);
  for (size_t i = 0; i < n_in; ++i) wanted[i] = needs_grad.count(op.inputs()[i]) > 0;
  require(op.kernel().differentiable(), "op '", op.name(), "' (", op.type(),
          ") has no gradient, but the loss depends through it on blobs being differentiated");
  std::vector<Shape> input_shapes;
  for (const Blob* b : op.inputs()) input_shapes.push_back(b->shape());
  GradientSpec spec = op.kernel().gradient_for(input_shapes);

  // Which gradient ops are needed: those writing a wanted input gradient, or a temp that a
  // needed op reads. Walk the spec backwards.
  std::vector<bool> op_needed(spec.ops.size(), false);
  std::set<int> temps_needed;
  for (auto [i, k] : spec.temp_aliases)
    if (wanted.at(i)) temps_needed.insert(k);
  for (size_t k = spec.ops.size(); k-- > 0;) {
    for (const GradRef& r : spec.ops[k].outputs) {
      if ((r.kind == GradRef::kInputGrad && wanted.at(r.index)) ||
          (r.kind == GradRef::kTemp && temps_needed.count(r.index)))
        op_needed[k] = true;
    }
    if (op_needed[k])
      for (const GradRef& r : spec.ops[k].inputs)
        if (r.kind == GradRef::kTemp || r.kind == GradRef::kReplicaSum)
          temps_needed.insert(r.index);
  }

  Graph::Scope scope(graph, op.name() + "::grad", true);
  Graph::Placement placement(graph, op.location(), op.thread());
  std::map<int, Blob*> input_grads;
  std::map<int, Blob*> temps;
  std::set<std::string> temp_names;
  std::map<int, Blob*> replica_sums;
  auto output_grad = [&](int j) {
    if (!out_grads.at(j)) {
      const Blob* out = op.outputs()[j];
      out_grads[j] = builder.constant(out->name() + "::zero_grad", out->shape(), 0.0, op.location(),
                                      op.thread());
    }
    return out_grads[j];
  };
  for (auto [i, j] : spec.aliases)
    if (wanted.at(i)) input_grads[i] = output_grad(j);
  for (size_t k = 0; k < spec.ops.size(); ++k) {
    if (!op_needed[k]) continue;
    const GradOp& g = spec.ops[k];
    std::vector<Blob*> inputs;
    for (const GradRef& r : g.inputs) {
      switch (r.kind) {
        case GradRef::kInput:
          inputs.push_back(op.inputs().at(r.index));
          break;
        case GradRef::kOutput:
          inputs.push_back(op.outputs().at(r.index));
          break;
        case GradRef::kOutputGrad:
          inputs.push_back(output_grad(r.index));
          break;
        case GradRef::kInputGrad:
          inputs.push_back(input_grads.at(r.index));
          break;
        case GradRef::kTemp:
          inputs.push_back(temps.at(r.index));
          break;
        case GradRef::kReplicaSum: {
          Blob*& sum = replica_sums[r.index];
          if (!sum) sum = graph.replica_sum(temps.at(r.index));
          inputs.push_back(sum);
          break;
        }
      }
    }
    std::vector<std::string> names;
    for (const GradRef& r : g.outputs) {
      CHECK(r.kind == GradRef::kInputGrad || r.kind == GradRef::kTemp)
          << op.type() << ": gradient op outputs must be input grads or temps";
      // A temporary is named after what makes it (relu_grad: the pre-activation's gradient in
      // conv_bias_relu's backward), numbered only where that name repeats.
      std::string name = r.kind == GradRef::kInputGrad ? "in" + std::to_string(r.index) : g.type;
      if (r.kind == GradRef::kTemp && temp_names.count(name)) name += std::to_string(r.index);
      if (r.kind == GradRef::kTemp) temp_names.insert(name);
      names.push_back(name);
    }
    std::vector<Blob*> outs = graph.apply("op" + std::to_string(k), g.type, g.attrs, inputs, names);
    for (size_t m = 0; m < outs.size(); ++m) {
      const GradRef& r = g.outputs[m];
      (r.kind == GradRef::kInputGrad ? input_grads : temps)[r.index] = outs[m];
    }
  }
  for (auto [i, k] : spec.temp_aliases)
    if (wanted.at(i)) input_grads[i] = temps.at(k);
  for (size_t i = 0; i < n_in; ++i) {
    if (!wanted[i]) continue;
    auto it = input_grads.find(static_cast<int>(i));
    if (it == input_grads.end()) continue;
    // A gradient lives where its blob lives: an op that bridges locations (a copy) gets its
    // input's gradient copied back, over the same link in the other direction.
    Blob* input = op.inputs()[i];
    builder.contribute(input, graph.copy_to(it->second, input->location(), op.thread()),
                       op.thread());
  }
}

}  // namespace

Gradients backward(Graph& graph, Blob* loss, const std::vector<Blob*>& wrt, double loss_weight) {
  require(loss != nullptr, "backward: null loss blob");
  require(loss->shape().count() == 1, "backward: loss '", loss->name(),
          "' must be a scalar, has shape ", loss->shape());
  graph.validate();
  std::set<const Blob*> from_wrt = reachable_forward(wrt);
  std::set<const Blob*> to_loss = reachable_backward(loss);
  std::set<const Blob*> needs_grad;
  for (const Blob* b : from_wrt)
    if (to_loss.count(b)) needs_grad.insert(b);

  std::vector<Op*> order = graph.topological_order();
  Graph::RoleScope role(graph, OpRole::kBackward);
  Builder builder(graph);
  const Op* loss_writer = loss->writers().empty() ? nullptr : loss->writers()[0];
  builder.contribute(
      loss,
      builder.constant(loss->name() + "::seed", loss->shape(), loss_weight, loss->location(),
                       loss_writer ? loss_writer->thread() : Graph::kMainThread),
      Graph::kMainThread);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Op& op = **it;
    bool relevant = false;
    for (const Blob* in : op.inputs()) relevant |= needs_grad.count(in) > 0;
    if (relevant) differentiate(graph, builder, op, needs_grad);
  }
  Gradients result;
  for (Blob* b : wrt) {
    if (Blob* g = builder.total(b)) result.grads_[b] = g;
  }
  return result;
}

}  // namespace purine
