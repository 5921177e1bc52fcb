#include "graphs/sgd.hpp"

#include "base/error.hpp"

namespace purine {

void SgdGraph::set_learning_rate(double lr, int rank) {
  for (auto& [location, blob] : lr_)
    if (location.rank == rank) blob->tensor().fill(static_cast<float>(lr));  // host or GPU
}

Blob* SgdGraph::learning_rate(Graph& graph, Location location) {
  Blob*& lr = lr_[location];
  if (!lr) lr = add_learning_rate(graph, location);
  return lr;
}

Blob* add_learning_rate(Graph& graph, Location location) {
  Graph::Scope root(graph, "sgd", true);
  Graph::Placement placement(graph, location);
  return graph.add_blob("lr@" + location.to_string(), Shape{});
}

void check_sgd_options(const SgdOptions& options) {
  require(options.momentum >= 0 && options.momentum < 1, "sgd: momentum must be in [0, 1), got ",
          options.momentum);
  require(options.weight_decay >= 0, "sgd: weight decay must be non-negative, got ",
          options.weight_decay);
}

Blob* add_sgd_update(Graph& graph, const Parameter& parameter, Blob* grad, Blob* lr,
                     const SgdOptions& options) {
  Blob* w = parameter.blob;
  Graph::RoleScope role(graph, OpRole::kOptimizer);
  const Op* grad_writer = grad->writers().empty() ? nullptr : grad->writers()[0];
  Graph::Scope scope(graph, w->name(), true);
  Graph::Placement placement(graph, w->location(),
                             grad_writer ? grad_writer->thread() : Graph::kMainThread);
  Blob* history = graph.add_blob("history", w->shape());
  Attrs zeros;
  zeros.set("shape", w->shape().dims()).set("value", 0.0);
  graph.add_state({history, "fill_constant", zeros, 0.0});
  Attrs attrs;
  attrs.set("momentum", options.momentum)
      .set("weight_decay", options.weight_decay * parameter.decay_mult);
  std::vector<Blob*> updated = graph.apply("update", "sgd_update", attrs, {w, grad, history, lr},
                                           {"updated", "updated_history"});
  graph.add_swap(history, updated[1]);
  return updated[0];
}

SgdGraph add_sgd(Graph& graph, const Gradients& gradients, const SgdOptions& options) {
  check_sgd_options(options);
  SgdGraph sgd;
  // Copy: adding states below must not disturb the list being walked.
  const std::vector<Parameter> parameters = graph.parameters();
  for (const Parameter& p : parameters) {
    if (!gradients.has(p.blob)) continue;
    Blob* lr = sgd.learning_rate(graph, p.blob->location());
    graph.add_swap(p.blob, add_sgd_update(graph, p, gradients.of(p.blob), lr, options));
  }
  return sgd;
}

}  // namespace purine
