// Element-wise activations and their gradient kernels.
//   relu:    x -> y = max(x, 0)          gradient: relu_grad(y, dy) -> dx = y > 0 ? dy : 0
//   sigmoid: x -> y = 1 / (1 + e^-x)     gradient: sigmoid_grad(y, dy) -> dx = dy * y * (1 - y)
//   tanh:    x -> y = tanh(x)            gradient: tanh_grad(y, dy) -> dx = dy * (1 - y^2)
// Any shape; y has x's shape. No attributes. The gradient kernels read the forward output y, not
// x, so the forward op may run in place (y sharing x's memory). All tensors must be contiguous.
// The gradient kernels are not differentiable.
#pragma once

#include <string>
#include <vector>

#include "operators/operator.hpp"

namespace purine {

// What the one-input activations share: y has x's shape; the gradient is one kernel reading y.
class ActivationOp : public SameShapeOp {
 public:
  using SameShapeOp::SameShapeOp;
  int num_inputs() const override { return 1; }
  bool differentiable() const override { return true; }
  GradientSpec gradient() const override;
  ChannelBlocking channel_blocking(const std::vector<Shape>&, int) const override {
    return ChannelBlocking::uniform_all(1, 1);  // element-wise: any order of the elements
  }

 protected:
  // The gradient kernel's type, e.g. ReluGradOp::kType.
  virtual std::string grad_type() const = 0;
};

// What the gradient kernels share: inputs (y, dy) of equal shape, output dx.
class ActivationGradOp : public SameShapeOp {
 public:
  using SameShapeOp::SameShapeOp;
  int num_inputs() const override { return 2; }
  ChannelBlocking channel_blocking(const std::vector<Shape>&, int) const override {
    return ChannelBlocking::uniform_all(2, 1);
  }

 protected:
  std::vector<std::string> input_names() const override { return {"y", "dy"}; }
};

class ReluOp : public TypedOperator<ReluOp, ActivationOp> {
 public:
  static constexpr char kType[] = "relu";
  static constexpr char kSignature[] = "x -> y = max(x, 0)";
  using TypedOperator::TypedOperator;

 protected:
  std::string grad_type() const override;
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class SigmoidOp : public TypedOperator<SigmoidOp, ActivationOp> {
 public:
  static constexpr char kType[] = "sigmoid";
  static constexpr char kSignature[] = "x -> y = 1 / (1 + e^-x)";
  using TypedOperator::TypedOperator;

 protected:
  std::string grad_type() const override;
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class TanhOp : public TypedOperator<TanhOp, ActivationOp> {
 public:
  static constexpr char kType[] = "tanh";
  static constexpr char kSignature[] = "x -> y = tanh(x)";
  using TypedOperator::TypedOperator;

 protected:
  std::string grad_type() const override;
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

// relu_grad also takes the parts of dy that a fan-out of y gathers, (y, dy_0, ..., dy_k-1) ->
// dx = relu_grad(y, dy_0 + ... + dy_k-1), added in input order: the floats of the sum op and
// relu_grad after it, in one pass instead of two (graphs/fusion.hpp).
class ReluGradOp : public TypedOperator<ReluGradOp, ActivationGradOp> {
 public:
  static constexpr char kType[] = "relu_grad";
  static constexpr char kSignature[] = "(y, dy_0, ..., dy_k-1) -> dx";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return kVariadic; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  ChannelBlocking channel_blocking(const std::vector<Shape>& inputs, int) const override {
    return ChannelBlocking::uniform_all(static_cast<int>(inputs.size()), 1);
  }

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class SigmoidGradOp : public TypedOperator<SigmoidGradOp, ActivationGradOp> {
 public:
  static constexpr char kType[] = "sigmoid_grad";
  static constexpr char kSignature[] = "(y, dy) -> dx";
  using TypedOperator::TypedOperator;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class TanhGradOp : public TypedOperator<TanhGradOp, ActivationGradOp> {
 public:
  static constexpr char kType[] = "tanh_grad";
  static constexpr char kSignature[] = "(y, dy) -> dx";
  using TypedOperator::TypedOperator;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

}  // namespace purine
