// Element-wise arithmetic on tensors of equal shape (no broadcasting). All tensors contiguous;
// an output may share memory with any of its inputs.
//   sum:   (x_0, ..., x_{n-1}) -> y = x_0 + x_1 + ... + x_{n-1}, added in input order for every
//          element (the explicit, deterministic gradient fan-in). No attributes.
//          Gradient (gradient_for, as it depends on the input count): every dx_i aliases dy.
//   sum_relu: (x_0, ..., x_{n-1}) -> y = max(x_0 + ... + x_{n-1}, 0): sum then relu in one pass,
//          the same floats (graphs/fusion.hpp; a residual block's join). No attributes.
//          Gradient: relu_grad(y, dy), which every dx_i is.
//   mul:   (a, b) -> y = a * b.  Gradient: mul(dy, b) -> da, mul(dy, a) -> db.
//   scale: x -> y = alpha * x, attribute `alpha` (float, default 1).  Gradient: scale(dy; alpha).
#pragma once

#include <string>
#include <vector>

#include "operators/operator.hpp"

namespace purine {

// What sum and sum_relu share: any number of inputs of one shape, taken element by element (in
// place, in any channel blocks), and a gradient that depends on how many there are.
class VariadicSumOp : public SameShapeOp {
 public:
  using SameShapeOp::SameShapeOp;
  int num_inputs() const override { return kVariadic; }
  bool differentiable() const override { return true; }
  OperatorTraits traits() const override { return {{Aliasing::kInPlace}}; }
  ChannelBlocking channel_blocking(const std::vector<Shape>& inputs, int) const override {
    return ChannelBlocking::uniform_all(static_cast<int>(inputs.size()), 1);
  }
  // Throws: the gradient depends on the number of inputs; use gradient_for().
  GradientSpec gradient() const override;
};

class SumOp : public TypedOperator<SumOp, VariadicSumOp> {
 public:
  static constexpr char kType[] = "sum";
  static constexpr char kSignature[] = "(x_0, ..., x_n-1) -> y = x_0 + ... + x_n-1";
  using TypedOperator::TypedOperator;
  GradientSpec gradient_for(const std::vector<Shape>& input_shapes) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class SumReluOp : public TypedOperator<SumReluOp, VariadicSumOp> {
 public:
  static constexpr char kType[] = "sum_relu";
  static constexpr char kSignature[] = "(x_0, ..., x_n-1) -> y = max(x_0 + ... + x_n-1, 0)";
  using TypedOperator::TypedOperator;
  GradientSpec gradient_for(const std::vector<Shape>& input_shapes) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class MulOp : public TypedOperator<MulOp, SameShapeOp> {
 public:
  static constexpr char kType[] = "mul";
  static constexpr char kSignature[] = "(a, b) -> y = a * b";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 2; }
  bool differentiable() const override { return true; }
  GradientSpec gradient() const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class ScaleOp : public TypedOperator<ScaleOp, SameShapeOp> {
 public:
  static constexpr char kType[] = "scale";
  static constexpr char kSignature[] = "x -> y = alpha * x; attrs: alpha (float, 1)";
  explicit ScaleOp(Attrs attrs);
  int num_inputs() const override { return 1; }
  float alpha() const { return static_cast<float>(alpha_); }  // what the kernels multiply by
  bool differentiable() const override { return true; }
  GradientSpec gradient() const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;

 private:
  const double alpha_;
};

}  // namespace purine
