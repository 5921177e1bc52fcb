// Per-channel bias, and its gradient kernel.
//   bias:      (x [N, C, ...], b [C]) -> y = x + b, b broadcast along axis 1 (y has x's shape).
//   bias_grad: (dy [N, C, ...]) -> db [C], the sum of dy over every axis but 1.
// No attributes. The gradient of x is dy itself (an alias, no op); bias_grad is not
// differentiable. All tensors must be contiguous; y may share x's memory (in place).
#pragma once

#include <string>
#include <vector>

#include "operators/operator.hpp"

namespace purine {

class BiasOp : public TypedOperator<BiasOp> {
 public:
  static constexpr char kType[] = "bias";
  static constexpr char kSignature[] = "(x [N, C, ...], b [C]) -> y = x + b along axis 1";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 2; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  bool differentiable() const override { return true; }
  GradientSpec gradient() const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class BiasGradOp : public TypedOperator<BiasGradOp> {
 public:
  static constexpr char kType[] = "bias_grad";
  static constexpr char kSignature[] = "dy [N, C, ...] -> db [C]";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 1; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

}  // namespace purine
