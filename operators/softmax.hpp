// Softmax over one axis, numerically stable (the maximum along the axis is subtracted first).
//   softmax:      x [N, C, ...] -> y, same shape; y = exp(x) / sum_c exp(x) along `axis`.
//   softmax_grad: (y, dy) -> dx = y * (dy - sum_c(dy * y)) along `axis`.
// Attribute `axis` (int, default 1; negative counts from the end) on both. The gradient of
// softmax is one softmax_grad op with the same axis; softmax_grad is not differentiable.
// All tensors must be contiguous.
#pragma once

#include <string>
#include <vector>

#include "operators/operator.hpp"

namespace purine {

class SoftmaxOp : public TypedOperator<SoftmaxOp, SameShapeOp> {
 public:
  static constexpr char kType[] = "softmax";
  static constexpr char kSignature[] = "x [N, C, ...] -> y; attrs: axis (int, 1)";
  explicit SoftmaxOp(Attrs attrs);
  int num_inputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  int64_t axis() const { return axis_; }  // as given: negative counts from the end
  bool differentiable() const override { return true; }
  GradientSpec gradient() const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;

 private:
  const int64_t axis_;
};

class SoftmaxGradOp : public TypedOperator<SoftmaxGradOp, SameShapeOp> {
 public:
  static constexpr char kType[] = "softmax_grad";
  static constexpr char kSignature[] = "(y, dy) -> dx; attrs: axis (int, 1)";
  explicit SoftmaxGradOp(Attrs attrs);
  int num_inputs() const override { return 2; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  int64_t axis() const { return axis_; }  // as given: negative counts from the end

 protected:
  std::vector<std::string> input_names() const override { return {"y", "dy"}; }
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;

 private:
  const int64_t axis_;
};

}  // namespace purine
