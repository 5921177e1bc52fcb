// 2-D max or average pooling over NCHW tensors, and its gradient kernel.
//   pool:      (x [N, C, H, W]) -> y [N, C, Ho, Wo]
//   pool_grad: (x, y, dy) -> dx (x's shape); y is checked for its shape, the maxima are found
//              again in x
// Attributes (the same on both): `mode` "max" or "avg" (default "max"); `kernel` (required) or
// `kernel_h` / `kernel_w`; `stride` (default: the kernel) or `stride_h` / `stride_w`; `pad`
// (default 0, less than the kernel) or `pad_h` / `pad_w`. The output size rounds down (as
// PyTorch, not caffe's ceiling): Ho = (H + 2 pad_h - kernel_h) / stride_h + 1, so every window
// lies inside the padded input and trailing rows or columns that fill no window are ignored.
// Max: padding never wins; the gradient goes to the first maximum of each window in row-major
// order (ties: the earliest element). Avg: every window divides by the full kernel area,
// padding included (count_include_pad), also where a window is clipped by the padding.
// pool is differentiable; pool_grad is not. All tensors must be contiguous.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "operators/operator.hpp"

namespace purine {

// The sizes of one pooling, validated.
struct PoolGeometry {
  bool max;  // false: average
  int64_t planes, h, w, ho, wo;
  int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
};

// The window of output (oh, ow) clipped to the input: rows [h0, h1), columns [w0, w1).
struct PoolWindow {
  int64_t h0, h1, w0, w1;
};
inline PoolWindow pool_window(const PoolGeometry& g, int64_t oh, int64_t ow) {
  const int64_t hs = oh * g.stride_h - g.pad_h, ws = ow * g.stride_w - g.pad_w;
  return {std::max<int64_t>(hs, 0), std::min(hs + g.kernel_h, g.h), std::max<int64_t>(ws, 0),
          std::min(ws + g.kernel_w, g.w)};
}
// Max pooling 2x2 with stride 2 and no padding: disjoint windows (the CPU's row-by-row path).
inline bool is_max_2x2(const PoolGeometry& g) {
  return g.max && g.kernel_h == 2 && g.kernel_w == 2 && g.stride_h == 2 && g.stride_w == 2 &&
         g.pad_h == 0 && g.pad_w == 0;
}

// The attributes of pool and pool_grad, read and checked once when an op is made.
struct PoolParams {
  // Throws purine::Error naming `type` and the attribute on a bad mode, kernel, stride or pad.
  PoolParams(const Attrs& attrs, const char* type);
  bool max;  // mode "max" (the default); false: "avg"
  int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
};

// What pool and pool_grad share: the attributes and the geometry.
class PoolOpBase : public Operator {
 public:
  PoolOpBase(Attrs attrs, const char* type);
  const PoolParams& params() const { return params_; }
  // Validates x [N, C, H, W] (input 0) against the attributes; throws purine::Error. (Public for
  // the GPU kernels.)
  PoolGeometry geometry(const Shape& x) const;

 private:
  const PoolParams params_;
};

class PoolOp : public TypedOperator<PoolOp, PoolOpBase> {
 public:
  static constexpr char kType[] = "pool";
  static constexpr char kSignature[] =
      "x [N, C, H, W] -> y [N, C, Ho, Wo]; attrs: mode (string, max|avg), kernel (int, required) "
      "or kernel_h/kernel_w, stride (int, kernel) or stride_h/stride_w, pad (int, 0) or "
      "pad_h/pad_w";
  explicit PoolOp(Attrs attrs) : TypedOperator(std::move(attrs), kType) {}
  int num_inputs() const override { return 1; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  ChannelBlocking channel_blocking(const std::vector<Shape>& inputs, int block) const override;
  bool differentiable() const override { return true; }
  GradientSpec gradient() const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class PoolGradOp : public TypedOperator<PoolGradOp, PoolOpBase> {
 public:
  static constexpr char kType[] = "pool_grad";
  static constexpr char kSignature[] = "(x, y, dy) -> dx; attrs: as pool";
  explicit PoolGradOp(Attrs attrs) : TypedOperator(std::move(attrs), kType) {}
  int num_inputs() const override { return 3; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  ChannelBlocking channel_blocking(const std::vector<Shape>& inputs, int block) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

}  // namespace purine
