// Per-channel bias, and its gradient kernel.
//   bias:      (x [N, C, ...], b [C]) -> y = x + b, b broadcast along axis 1 (y has x's shape).
//   bias_grad: (dy [N, C, ...]) -> db [C], the sum of dy over every axis but 1.
//   bias_relu: (x [N, C, ...], b [C]) -> y = max(x + b, 0): bias then relu in one pass
//              (graphs/fusion.hpp puts it where a graph has that chain, after an inner product).
//   bias_relu_grad: (y, dy) -> (dx, db [C]): relu_grad(y, dy) and bias_grad of that in one op
//              (on a GPU one kernel, each element of dx added as it is written). The gradient
//              of bias_relu, and of conv_bias_relu's bias and ReLU; the same floats as
//              relu_grad then bias_grad.
// No attributes. The gradient of bias's x is dy itself (an alias, no op); bias_grad is not
// differentiable. All tensors must be contiguous; y may share x's memory (in place). The
// gradients take [N, C, H, W] tensors in channel blocks (Tensor::channel_block), the same bits.
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

class BiasReluOp : public TypedOperator<BiasReluOp> {
 public:
  static constexpr char kType[] = "bias_relu";
  static constexpr char kSignature[] = "(x [N, C, ...], b [C]) -> y = max(x + b, 0) along axis 1";
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

class BiasReluGradOp : public TypedOperator<BiasReluGradOp> {
 public:
  static constexpr char kType[] = "bias_relu_grad";
  static constexpr char kSignature[] = "(y [N, C, ...], dy) -> (dx = dy * (y > 0), db [C])";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 2; }
  int num_outputs() const override { return 2; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  ChannelBlocking channel_blocking(const std::vector<Shape>& inputs, int block) const override;

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
  ChannelBlocking channel_blocking(const std::vector<Shape>& inputs, int block) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

}  // namespace purine
