// An inner product with its bias, and optionally the ReLU after it, as one op:
//   inner_product_bias: (x [N, ...], w [O, K], b [O]) -> y [N, O] = x w^T + b, or
//                       max(x w^T + b, 0) with relu = 1.
// graphs/fusion.hpp makes it from inner_product + bias, or inner_product + bias_relu, at a GPU,
// where cuBLASLt adds the bias (and applies the ReLU) in the product's epilogue: one kernel
// instead of two. On the CPU (and on emulated devices) it runs the unfused kernels in turn, the
// same floats. Its gradient is the unfused ops' gradients, op for op. Attribute `relu` (int, 0
// or 1, default 0). All tensors must be contiguous.
#pragma once

#include <vector>

#include "operators/operator.hpp"

namespace purine {

class InnerProductBiasOp : public TypedOperator<InnerProductBiasOp> {
 public:
  static constexpr char kType[] = "inner_product_bias";
  static constexpr char kSignature[] =
      "(x [N, ...], w [O, K], b [O]) -> y [N, O] = x w^T + b, max(., 0) with relu; attrs: relu "
      "(int, 0)";
  explicit InnerProductBiasOp(Attrs attrs);
  int num_inputs() const override { return 3; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  OpCost cost(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) const override;
  bool differentiable() const override { return true; }
  GradientSpec gradient() const override;
  bool relu() const { return relu_; }

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;

 private:
  const bool relu_;
};

}  // namespace purine
