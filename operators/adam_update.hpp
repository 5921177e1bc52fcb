// One step of Adam (Kingma and Ba, 2015), or of AdamW (Loshchilov and Hutter, 2019), with
// PyTorch's formulas (torch.optim.Adam / AdamW):
//   adam_update: (weight, grad, m, v, lr {}, step {}) -> (new_weight, new_m, new_v)
//     g  = grad + weight_decay * weight            (Adam: L2 decay through the gradient)
//     w  = weight * (1 - lr * weight_decay)        (AdamW, `decoupled` = 1: decay on the weight)
//     new_m = beta1 * m + (1 - beta1) * g
//     new_v = beta2 * v + (1 - beta2) * g * g
//     new_weight = w - lr / (1 - beta1^t) * new_m / (sqrt(new_v) / sqrt(1 - beta2^t) + eps)
// with t = step, the 1-based number of this update. lr and step are scalar tensors (shape {})
// that the trainer writes between runs. Attributes: beta1 (default 0.9) and beta2 (0.999) in
// [0, 1), eps (1e-8) > 0, weight_decay (0) >= 0, decoupled (int, 0 or 1). weight, grad, m and v
// have one shape; outputs may share memory with the inputs of their role (an in-place update).
// Not differentiable. All tensors must be contiguous. Attribute count_non_finite (int, 0 or 1;
// CPU only): one more output, the number of non-finite new weights, as sgd_update's.
//
// Several weights with the same attributes in one op (graphs/fusion.hpp's fuse_updates, at a
// GPU): (w_1, g_1, m_1, v_1, ..., w_K, g_K, m_K, v_K, lr, step) -> (new_w_1, new_m_1, new_v_1,
// ..., new_w_K, new_m_K, new_v_K), each group of its own shape, each updated as above: on a GPU
// one kernel for them all instead of K, the same floats.
#pragma once

#include <vector>

#include "operators/operator.hpp"

namespace purine {

class AdamUpdateOp : public TypedOperator<AdamUpdateOp> {
 public:
  static constexpr char kType[] = "adam_update";
  static constexpr char kSignature[] =
      "(weight, grad, m, v, ..., lr {}, step {}) -> (new_weight, new_m, new_v, ..., [non_finite "
      "{}]); attrs: beta1 (float, 0.9), beta2 (float, 0.999), eps (float, 1e-8), weight_decay "
      "(float, 0), decoupled (int, 0), count_non_finite (int, 0)";
  explicit AdamUpdateOp(Attrs attrs);
  int num_inputs() const override { return kVariadic; }
  int num_outputs() const override { return kVariadic; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;

  struct Hyper {
    float beta1, beta2, eps, weight_decay;
    // 1 - beta in double precision, then rounded (as PyTorch computes them): 1 - 0.999f in
    // float would be off by 1.3e-5.
    float one_minus_beta1, one_minus_beta2;
    bool decoupled;
    bool count_non_finite;
  };
  const Hyper& hyper() const { return hyper_; }

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;

 private:
  const Hyper hyper_;
};

}  // namespace purine
