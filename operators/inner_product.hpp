// Fully connected layer without bias (add a "bias" op for that), and its gradient kernels.
//   inner_product:             (x [N, ...], w [O, K]) -> y [N, O] = x w^T, where x is read as
//                              [N, K] with K = product of x's dimensions after the first.
//   inner_product_grad_data:   (dy [N, O], w [O, K], x) -> dx (x's shape) = dy w; x is read
//                              for its shape only.
//   inner_product_grad_weight: (dy [N, O], x [N, ...]) -> dw [O, K] = dy^T x.
// No attributes. inner_product is differentiable in x and w; the gradient kernels are not.
// All tensors must be contiguous. Results are bit-identical for any thread count: the GEMMs are
// split into blocks that depend on the shapes only, each computed by one thread.
#pragma once

#include <string>
#include <vector>

#include "operators/operator.hpp"

namespace purine {

// y's shape [N, O] for x [N, ...] and w [O, K]; throws purine::Error naming `type` when they
// do not fit (inner_product and inner_product_bias check their inputs with it).
Shape inner_product_shape(const std::string& type, const Shape& x, const Shape& w);

class InnerProductOp : public TypedOperator<InnerProductOp> {
 public:
  static constexpr char kType[] = "inner_product";
  static constexpr char kSignature[] = "(x [N, ...], w [O, K]) -> y [N, O] = x w^T";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 2; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  OpCost cost(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) const override;
  bool differentiable() const override { return true; }
  GradientSpec gradient() const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class InnerProductGradDataOp : public TypedOperator<InnerProductGradDataOp> {
 public:
  static constexpr char kType[] = "inner_product_grad_data";
  static constexpr char kSignature[] = "(dy [N, O], w [O, K], x) -> dx";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 3; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  OpCost cost(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class InnerProductGradWeightOp : public TypedOperator<InnerProductGradWeightOp> {
 public:
  static constexpr char kType[] = "inner_product_grad_weight";
  static constexpr char kSignature[] = "(dy [N, O], x [N, ...]) -> dw [O, K]";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 2; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  OpCost cost(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

}  // namespace purine
