// Concatenation and its inverse along one axis, as strided copies.
//   concat: (x_0, ..., x_{n-1}) -> y. The inputs agree in every dimension but `axis`; y's extent
//     along `axis` is the sum of theirs, x_0 first. Attribute `axis` (int, default 1; negative
//     counts from the end). Gradient (gradient_for, as it depends on the inputs' extents):
//     split(dy; axis, sizes = the inputs' extents) -> (dx_0, ..., dx_{n-1}).
//   split: x -> (y_0, ..., y_{n-1}) with y_k's extent along `axis` equal to sizes[k].
//     Attributes: `axis` (int, default 1) and `sizes` (int list, required; sum = x's extent).
//     Its gradient is concat(dy_0, ..., dy_{n-1}; axis) -> dx (autodiff feeds zeros for
//     output gradients that are absent).
// Inputs and outputs may be strided views (a slow element-wise path); contiguous tensors are
// copied block by block, tensors in channel blocks (Tensor::channel_block) too when cut along
// the channels at multiples of the block: the same memory copies as plain ones. Their traits let
// the compile step alias them as views of one buffer when the layout allows, in which case these
// kernels do not run at all.
#pragma once

#include <string>
#include <vector>

#include "operators/operator.hpp"

namespace purine {

class ConcatOp : public TypedOperator<ConcatOp> {
 public:
  static constexpr char kType[] = "concat";
  static constexpr char kSignature[] = "(x_0, ..., x_n-1) -> y; attrs: axis (int, 1)";
  explicit ConcatOp(Attrs attrs);
  int num_inputs() const override { return kVariadic; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  // Along the channels of [N, C, H, W] with N > 1 and every part's channels a multiple of the
  // block: all in blocks or none (the same copies). With N = 1 the compile step makes the parts
  // views of the whole instead, which blocks would refuse.
  ChannelBlocking channel_blocking(const std::vector<Shape>& inputs, int block) const override;
  int64_t axis() const { return axis_; }  // as given: negative counts from the end
  bool differentiable() const override { return true; }
  OperatorTraits traits() const override {
    OperatorTraits t{{Aliasing::kConcat, axis_}};
    t.strided_on_cpu = true;
    return t;
  }
  // Throws: the gradient depends on the inputs' extents; use gradient_for().
  GradientSpec gradient() const override;
  GradientSpec gradient_for(const std::vector<Shape>& input_shapes) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;

 private:
  const int64_t axis_;
};

class SplitOp : public TypedOperator<SplitOp> {
 public:
  static constexpr char kType[] = "split";
  static constexpr char kSignature[] =
      "x -> (y_0, ..., y_n-1); attrs: axis (int, 1), sizes (ints, required)";
  explicit SplitOp(Attrs attrs);
  int num_inputs() const override { return 1; }
  int num_outputs() const override { return static_cast<int>(sizes_.size()); }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  // Along the channels of [N, C, H, W] with N > 1 and every part's channels a multiple of the
  // block: all in blocks or none (the same copies). With N = 1 the compile step makes the parts
  // views of the whole instead, which blocks would refuse.
  ChannelBlocking channel_blocking(const std::vector<Shape>& inputs, int block) const override;
  int64_t axis() const { return axis_; }  // as given: negative counts from the end
  bool differentiable() const override { return true; }
  OperatorTraits traits() const override {
    OperatorTraits t{{Aliasing::kSplit, axis_}};
    t.strided_on_cpu = true;
    return t;
  }
  GradientSpec gradient() const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;

 private:
  const int64_t axis_;
  const std::vector<int64_t> sizes_;
};

}  // namespace purine
