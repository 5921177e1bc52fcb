// Gradient clipping by global norm, PyTorch's torch.nn.utils.clip_grad_norm_, as three ops:
//   sum_squares: x -> s {} = the sum of x's squares, accumulated in double, in element order.
//   clip_scale:  (s_0, ..., s_n-1 {}) -> c {} = min(1, max_norm / (sqrt(s_0 + ... + s_n-1) +
//                1e-6)), the partial sums added in input order. Attribute `max_norm` (> 0).
//   scale_by:    (x, c {}) -> y = c * x.
// The sums of squares of every gradient (one op each, where the gradient is) meet at every
// updater, which scales its gradients by c before its update (graphs/data_parallel.hpp). None
// is differentiable. CPU and GPU kernels (operators/cuda/clip.cu); contiguous tensors.
#pragma once

#include <vector>

#include "operators/operator.hpp"

namespace purine {

class SumSquaresOp : public TypedOperator<SumSquaresOp> {
 public:
  static constexpr char kType[] = "sum_squares";
  static constexpr char kSignature[] = "x -> s {} = the sum of x's squares";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 1; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class ClipScaleOp : public TypedOperator<ClipScaleOp> {
 public:
  static constexpr char kType[] = "clip_scale";
  static constexpr char kSignature[] =
      "(s_0, ..., s_n-1 {}) -> c {} = min(1, max_norm / (sqrt(sum) + 1e-6)); attrs: max_norm "
      "(float, required)";
  explicit ClipScaleOp(Attrs attrs);
  int num_inputs() const override { return kVariadic; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  double max_norm() const { return max_norm_; }

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;

 private:
  const double max_norm_;
};

class ScaleByOp : public TypedOperator<ScaleByOp> {
 public:
  static constexpr char kType[] = "scale_by";
  static constexpr char kSignature[] = "(x, c {}) -> y = c * x";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 2; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

}  // namespace purine
