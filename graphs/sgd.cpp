#include "graphs/sgd.hpp"

#include "purine/base/error.hpp"

namespace purine {

void SgdGraph::set_learning_rate(double lr) {
  for (auto& [location, blob] : lr_) *blob->tensor().mutable_data() = static_cast<float>(lr);
}

SgdGraph add_sgd(Graph& graph, const Gradients& gradients, const SgdOptions& options) {
  require(options.momentum >= 0 && options.momentum < 1,
          "sgd: momentum must be in [0, 1), got ", options.momentum);
  require(options.weight_decay >= 0, "sgd: weight decay must be non-negative, got ",
          options.weight_decay);
  SgdGraph sgd;
  // Copy: adding states below must not disturb the list being walked.
  const std::vector<Parameter> parameters = graph.parameters();
  for (const Parameter& p : parameters) {
    if (!gradients.has(p.blob)) continue;
    Blob* w = p.blob;
    Blob* grad = gradients.of(w);
    const Op* grad_writer = grad->writers().empty() ? nullptr : grad->writers()[0];
    Graph::Scope scope(graph, w->name(), true);
    Graph::Placement placement(graph, w->location(), grad_writer ? grad_writer->thread() : "main");
    Blob*& lr = sgd.lr_[w->location()];
    if (!lr) {
      Graph::Scope root(graph, "sgd", true);
      lr = graph.add_blob("lr@" + w->location().to_string(), Shape{});
    }
    Blob* history = graph.add_blob("history", w->shape());
    Attrs zeros;
    zeros.set("shape", w->shape().dims()).set("value", 0.0);
    graph.add_state({history, "fill_constant", zeros, 0.0});
    Attrs attrs;
    attrs.set("momentum", options.momentum).set("weight_decay", options.weight_decay * p.decay_mult);
    std::vector<Blob*> updated = graph.apply("update", "sgd_update", attrs, {w, grad, history, lr},
                                             {"updated", "updated_history"});
    graph.add_swap(w, updated[0]);
    graph.add_swap(history, updated[1]);
  }
  return sgd;
}

}  // namespace purine
