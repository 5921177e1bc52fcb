// One step of stochastic gradient descent with momentum and L2 weight decay, Caffe style.
//   sgd_update: (weight, grad, history, lr {}) -> (new_weight, new_history)
//     new_history = momentum * history + lr * (grad + weight_decay * weight)
//     new_weight  = weight - new_history
// weight, grad and history have one shape; lr is a scalar tensor (shape {}) so that a learning
// rate schedule can change it between runs without rebuilding the op. Attributes `momentum` and
// `weight_decay` (floats, default 0, both >= 0). Outputs may share memory with the inputs of the
// same role (an in-place update). Not differentiable. All tensors must be contiguous.
// Attribute count_non_finite (int, 0 or 1; CPU only): one more output, a scalar {} holding how
// many of the new weights are NaN or infinite, counted as they are written (the trainer's
// divergence check, train/training_graph.cpp, without another pass over the weights).
//
// Several weights with the same attributes in one op (graphs/fusion.hpp's fuse_updates, at a
// GPU): (w_1, g_1, h_1, ..., w_K, g_K, h_K, lr) -> (new_w_1, new_h_1, ..., new_w_K, new_h_K),
// each group of its own shape, each updated as above: on a GPU one kernel for them all instead
// of K, the same floats.
#pragma once

#include <string>
#include <vector>

#include "operators/operator.hpp"

namespace purine {

class SgdUpdateOp : public TypedOperator<SgdUpdateOp> {
 public:
  static constexpr char kType[] = "sgd_update";
  static constexpr char kSignature[] =
      "(weight, grad, history, ..., lr {}) -> (new_weight, new_history, ..., [non_finite {}]); "
      "attrs: momentum (float, 0), weight_decay (float, 0), count_non_finite (int, 0)";
  explicit SgdUpdateOp(Attrs attrs);
  float momentum() const { return momentum_; }
  float weight_decay() const { return weight_decay_; }
  bool counts_non_finite() const { return count_non_finite_; }
  int num_inputs() const override { return kVariadic; }
  int num_outputs() const override { return kVariadic; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;

 private:
  const float momentum_;
  const float weight_decay_;
  const bool count_non_finite_;
};

}  // namespace purine
