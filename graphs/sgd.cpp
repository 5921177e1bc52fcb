#include "graphs/sgd.hpp"

#include "base/error.hpp"

namespace purine {

namespace {

// The blobs the host writes are host memory (the tensors' fill() is then a plain store); a GPU
// location reads a copy of its rank's, made on its stream in every run, so that setting a
// scalar never waits for the device.
Location host_of(Location location) {
  return location.is_cpu() ? location : Location::cpu(location.rank);
}

void fill_host_scalars(const std::map<Location, Blob*>& scalars, int rank, float value) {
  for (const auto& [location, blob] : scalars)
    if (location.rank == rank) blob->tensor().fill(value);
}

// The scalar "sgd::<name>@<host location>" in `scalars`, created on first use, or its copy at
// a GPU `location`.
Blob* scalar_at(Graph& graph, std::map<Location, Blob*>& scalars, const std::string& name,
                Location location) {
  const Location host = host_of(location);
  Blob*& blob = scalars[host];
  if (!blob) {
    Graph::Scope root(graph, "sgd", true);
    Graph::Placement placement(graph, host);
    blob = graph.add_blob(name + "@" + host.to_string(), Shape{});
  }
  if (location == host) return blob;
  Graph::RoleScope role(graph, OpRole::kOptimizer);
  return graph.copy_to(blob, location, Graph::kMainThread);
}

}  // namespace

void SgdGraph::set_learning_rate(double lr, int rank) {
  fill_host_scalars(lr_, rank, static_cast<float>(lr));
}

void SgdGraph::set_step(int64_t step, int rank) {
  fill_host_scalars(step_, rank, static_cast<float>(step));
}

Blob* SgdGraph::step(Graph& graph, Location location) {
  return scalar_at(graph, step_, "step", location);
}

std::vector<std::string> optimizer_states(const SgdOptions& options) {
  if (options.optimizer == Optimizer::kSgd) return {"history"};
  return {"adam_m", "adam_v"};
}

Blob* SgdGraph::learning_rate(Graph& graph, Location location) {
  return scalar_at(graph, lr_, "lr", location);
}

void check_sgd_options(const SgdOptions& options) {
  require(options.momentum >= 0 && options.momentum < 1, "sgd: momentum must be in [0, 1), got ",
          options.momentum);
  require(options.weight_decay >= 0, "sgd: weight decay must be non-negative, got ",
          options.weight_decay);
  require(options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 && options.beta2 < 1,
          "adam: beta1 and beta2 must be in [0, 1), got ", options.beta1, " and ", options.beta2);
  require(options.eps > 0, "adam: eps must be positive, got ", options.eps);
}

Blob* add_sgd_update(Graph& graph, const Parameter& parameter, Blob* grad, Blob* lr,
                     const SgdOptions& options, SgdGraph* sgd) {
  Blob* w = parameter.blob;
  Graph::RoleScope role(graph, OpRole::kOptimizer);
  const Op* grad_writer = grad->writers().empty() ? nullptr : grad->writers()[0];
  const bool adam = options.optimizer != Optimizer::kSgd;
  require(!adam || sgd, "add_sgd_update: Adam needs the SgdGraph that holds its step blobs");
  Blob* step = adam ? sgd->step(graph, w->location()) : nullptr;
  Graph::Scope scope(graph, w->name(), true);
  Graph::Placement placement(graph, w->location(),
                             grad_writer ? grad_writer->thread() : Graph::kMainThread);
  std::vector<Blob*> states;
  for (const std::string& name : optimizer_states(options)) {
    states.push_back(graph.add_blob(name, w->shape()));
    Attrs zeros;
    zeros.set("shape", w->shape().dims()).set("value", 0.0);
    graph.add_state({states.back(), "fill_constant", zeros, 0.0});
  }
  const double decay = options.weight_decay * parameter.decay_mult;
  std::vector<Blob*> updated;
  if (!adam) {
    Attrs attrs;
    attrs.set("momentum", options.momentum).set("weight_decay", decay);
    updated = graph.apply("update", "sgd_update", attrs, {w, grad, states[0], lr},
                          {"updated", "updated_history"});
  } else {
    Attrs attrs;
    attrs.set("beta1", options.beta1)
        .set("beta2", options.beta2)
        .set("eps", options.eps)
        .set("weight_decay", decay)
        .set("decoupled", static_cast<int64_t>(options.optimizer == Optimizer::kAdamW));
    updated = graph.apply("update", "adam_update", attrs, {w, grad, states[0], states[1], lr, step},
                          {"updated", "updated_adam_m", "updated_adam_v"});
  }
  for (size_t i = 0; i < states.size(); ++i) graph.add_swap(states[i], updated[i + 1]);
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
    graph.add_swap(p.blob, add_sgd_update(graph, p, gradients.of(p.blob), lr, options, &sgd));
  }
  return sgd;
}

}  // namespace purine
