// Softmax followed by the multinomial logistic loss, fused for numerical stability.
//   softmax_cross_entropy: (logits [N, C], labels [N]) -> (loss {}, probs [N, C])
//     probs = softmax(logits) along C; loss = mean over the N rows of -log probs[n, label_n],
//     computed as logsumexp(logits[n]) - logits[n, label_n] (no log of a rounded-off zero).
//     Labels are floats holding class indices; one that is not an integer in [0, C) throws
//     purine::Error naming the row and the value.
//   softmax_cross_entropy_grad: (probs, labels, dloss {}) -> dlogits
//     = dloss * (probs - onehot(labels)) / N.
// No attributes. Only the loss (output 0) is differentiated: probs is a by-product for
// inspection and its gradient is ignored; labels get no gradient. All tensors contiguous.
#pragma once

#include <string>
#include <vector>

#include "operators/operator.hpp"

namespace purine {

class SoftmaxCrossEntropyOp : public TypedOperator<SoftmaxCrossEntropyOp> {
 public:
  static constexpr char kType[] = "softmax_cross_entropy";
  static constexpr char kSignature[] = "(logits [N, C], labels [N]) -> (loss {}, probs [N, C])";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 2; }
  int num_outputs() const override { return 2; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  bool differentiable() const override { return true; }
  GradientSpec gradient() const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class SoftmaxCrossEntropyGradOp : public TypedOperator<SoftmaxCrossEntropyGradOp> {
 public:
  static constexpr char kType[] = "softmax_cross_entropy_grad";
  static constexpr char kSignature[] = "(probs, labels, dloss {}) -> dlogits";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 3; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

}  // namespace purine
