// Autodiff on the bi-graph: backward() adds to a graph the ops that compute the gradient of a
// scalar loss blob with respect to chosen blobs. Each operator declares its gradient as a
// GradientSpec (operators/operator.hpp); autodiff instantiates those specs in reverse
// topological order. Gradient fan-in (a blob read by several ops) is an explicit "sum" op whose
// inputs are ordered deterministically, never a race on an "accumulate" flag.
#pragma once

#include <map>
#include <vector>

#include "purine/graph.hpp"

namespace purine {

class Gradients {
 public:
  // The gradient blob of `blob`; throws purine::Error if the loss does not depend on it.
  Blob* of(const Blob* blob) const;
  bool has(const Blob* blob) const { return grads_.count(blob) > 0; }
  const std::map<const Blob*, Blob*>& all() const { return grads_; }

 private:
  friend Gradients backward(Graph&, Blob*, const std::vector<Blob*>&, double);
  std::map<const Blob*, Blob*> grads_;
};

// Adds gradient ops for d(loss_weight * loss)/d(wrt[i]) to `graph`. Gradient ops take the
// location and thread of the forward op they differentiate; the gradient of a blob lives at the
// blob's location (a copy's gradient is copied back to the copy's source, between ranks too), and
// the gradients of a blob read at several locations are summed there, in a fixed order. `loss` must
// be a scalar. Throws purine::Error if the loss depends on a `wrt` blob only through a
// non-differentiable op.
Gradients backward(Graph& graph, Blob* loss, const std::vector<Blob*>& wrt,
                   double loss_weight = 1.0);

}  // namespace purine
