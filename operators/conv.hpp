// 2-D convolution (cross-correlation, as in caffe and PyTorch) without bias (add a "bias" op),
// and its gradient kernels. NCHW activations, OIHW weights.
//   conv:             (x [N, C, H, W], w [O, C, kh, kw]) -> y [N, O, Ho, Wo]
//   conv_grad_data:   (dy [N, O, Ho, Wo], w, x) -> dx (x's shape); x is read for its shape only
//   conv_grad_weight: (dy [N, O, Ho, Wo], x, w) -> dw (w's shape); w is read for its shape only
// Attributes (the same on all three): `stride` (default 1) or `stride_h` / `stride_w`; `pad`
// (zero padding on both sides, default 0) or `pad_h` / `pad_w`. The output size rounds down:
//   Ho = (H + 2 pad_h - kh) / stride_h + 1,  Wo = (W + 2 pad_w - kw) / stride_w + 1.
// conv is differentiable in x and w; the gradient kernels are not. All tensors must be
// contiguous.
//
// `engine` (default "auto") picks the kernel: "onednn", oneDNN's blocked-layout convolutions
// (reordering from and to our plain tensors); "im2col", im2col + GEMM (on output planes of 49
// pixels or fewer, GEMMs over groups of images for the forward and the weight gradient);
// "winograd", Winograd's minimal filtering for 3x3 and 5x5 stride-1 kernels with pad below the
// kernel size on CPUs with AVX2 and FMA (cpu/conv_winograd.cpp): "winograd:F(4x4,3x3)" for 3x3
// forwards and data gradients over planes of 3x3 pixels or more (weight gradients only with 32
// channels or fewer between input and output), "winograd:F(2x2,3x3)" for the other 3x3 ones and
// "winograd:F(2x2,5x5)", 4x, 2.25x and 2.78x fewer multiply-adds; its sums
// round otherwise than the direct convolution's: F(2x2, 3x3) within a few units in the last
// place of the largest products, the others about 1e-5 of the sums' size), auto's choice
// elsewhere; "auto", Winograd's for 3x3 and 5x5 stride-1
// kernels of 16 or more input and output channels where oneDNN runs AVX2 kernels (the weight
// gradient, and 5x5 kernels in every direction, over output planes of 7x7 or more), else oneDNN
// except in the backward passes with C < 8 or O < 8 channels, the weight gradient of small output
// planes (49 pixels or fewer with oneDNN's AVX2 kernels, 9 with its AVX-512 ones) and the forward
// of 2x2 or smaller ones (1x1 with AVX-512), where im2col is faster, and where oneDNN declines the
// geometry; a convolution in which every output pixel sees every input pixel runs as a dense layer
// in every direction ("gemm:dense planes", cpu/conv_dense_planes.cpp: the whole batch times a
// matrix of the taps joining each pair of pixels; GoogLeNet's 1x1 and 2x2 planes at 28x28), and a
// stride-1 kernel whose outer taps meet only padding as the convolution of its other taps ("cropped
// KxK:...", cpu/conv_cropped_taps.cpp). Each op instance caches its primitives and buffers for the
// last geometry and thread count it ran with; convolutions under 2^20 multiply-adds run on the
// calling thread alone. Thread counts and results: every kernel is bit-identical for any thread
// count, on any ISA oneDNN picks. im2col by construction (per-image GEMMs); Winograd's sums each
// output pixel on one thread in a fixed order, its weight gradient in the fixed chunks below, and
// reads plain and channel-blocked tensors to the same bits; oneDNN's forward and data gradient do
// not split reductions across threads; the weight gradient (both engines) sums fixed chunks of the
// batch (at most 8; oneDNN's of at least 4,096 output pixels each), each on one thread, and adds
// them in chunk order; GEMMs over groups of images ("im2col:image groups",
// cpu/conv_image_groups.cpp) compute fixed tiles, one GEMM each, the groups of the weight gradient
// added in order; the dense planes' GEMMs fixed blocks of the output, one GEMM each, each tap's
// pairs then added in order.
// `deterministic` (conv_grad_weight; default: deterministic_kernels(), on unless turned off,
// operators/kernel_determinism.hpp): 0 runs oneDNN's weight gradient as one primitive over all
// threads instead, whose bits depend on the thread count and the ISA (its blocked kernels split
// the batch among the threads); faster on many cores. On a GPU it applies to all three
// directions (cuDNN's algorithms with atomics).
// `gpu_algorithm` (default -1): on a GPU, run this cuDNN algorithm of the op's direction (a
// cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t value) instead of the timed choice; an algorithm
// cuDNN does not offer for the geometry is an error naming it. For tests and measurements.
//
// conv_bias_relu: (x, w, b [O]) -> y = max(conv(x, w) + b, 0), the three ops conv, bias and relu
// in one pass over y (graphs/fusion.hpp puts it where a graph has that chain). Attributes as
// conv. Its gradient is the unfused ops' gradient: bias_relu_grad(y, dy) (relu_grad and
// bias_grad in one op, operators/bias.hpp), then conv_grad_data and conv_grad_weight of its dx;
// it reads y, so the pre-activation need not be kept. On the CPU, oneDNN's convolution with a
// per-channel binary add and a ReLU as post-ops (applied once the whole sum is done: bit-identical
// to the three ops, tested under AVX-512 and AVX2; oneDNN does not say where its convolution's own
// bias enters a sum split over channel blocks), or the im2col kernel with the bias and ReLU applied
// per image. On a GPU, cudnnConvolutionBiasActivationForward with the forward algorithm conv would
// use.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "operators/operator.hpp"

namespace purine {

// The sizes of one convolution, validated.
struct ConvGeometry {
  int64_t n, c, h, w;  // input
  int64_t o, kh, kw;   // weight [O, C, kh, kw]
  int64_t ho, wo;      // output
  int64_t stride_h, stride_w, pad_h, pad_w;
  bool operator==(const ConvGeometry& other) const;
};

enum class ConvDirection { kForward, kBackwardData, kBackwardWeights };

// The channel blocks (Tensor::channel_block) of a CPU kernel's run(a, b, bias, out) arguments:
// forward (x, w) -> y, backward data (dy, w) -> dx, backward weights (dy, x) -> dw; 0: plain.
struct ConvBlocks {
  int a = 0, b = 0, out = 0;
  bool operator==(const ConvBlocks& other) const {
    return a == other.a && b == other.b && out == other.out;
  }
};

// The channel block of oneDNN's direct convolutions on this CPU (Tensor::channel_block): 16 with
// AVX-512, 8 with AVX2 (ONEDNN_MAX_CPU_ISA caps it).
int conv_channel_block();

class ConvKernel;  // cpu/conv_kernel.hpp: the cached primitives or buffers of one direction

// The attributes of the convolution ops (above), read and checked once when an op is made; the
// CPU and GPU kernels read them.
struct ConvParams {
  // Throws purine::Error naming `type` and the attribute on a bad stride, pad or engine.
  ConvParams(const Attrs& attrs, const char* type);
  // `deterministic` as the kernel made now takes it: the attribute, else deterministic_kernels().
  bool deterministic_now() const;
  int64_t stride_h, stride_w, pad_h, pad_w;
  std::string engine;  // "auto", "onednn" or "im2col"
  int deterministic;   // 1, 0, or -1 when not given
  int gpu_algorithm;   // -1: the timed choice
};

// What the convolution ops share: the attributes and the kernel cache.
class ConvOpBase : public Operator {
 public:
  ConvOpBase(Attrs attrs, const char* type);
  ~ConvOpBase() override;
  const ConvParams& params() const { return params_; }

  // The kernel that ran last ("onednn:<implementation>" or "im2col"); empty before the first
  // run. For tests and traces.
  std::string kernel_name() const;
  // Validates x [N, C, H, W] (input number x_input) and w [O, C, kh, kw] (input w_input)
  // against the attributes; throws purine::Error naming the inputs. (Public for the GPU
  // kernels, which read the same geometry.)
  ConvGeometry geometry(const Shape& x, int x_input, const Shape& w, int w_input) const;

 protected:
  // The kernel for `direction` and `g`, built on first use and again whenever the geometry,
  // the arguments' channel blocks or the calling thread's OpenMP thread count changed. `bias_relu`:
  // the forward of conv_bias_relu.
  ConvKernel& kernel(ConvDirection direction, const ConvGeometry& g, bool bias_relu = false,
                     ConvBlocks blocks = {});
  // For channel_blocking(): `blocking` (its arguments) for the CPU kernel of `direction` with
  // activations in channel blocks of `block`, and which form that kernel reorders; none unless
  // `block` is conv_channel_block(), oneDNN's.
  ChannelBlocking blocking(ConvDirection direction, const Shape& x, int x_input, const Shape& w,
                           int w_input, int block, ChannelBlocking blocking) const;

 private:
  const ConvParams params_;
  std::unique_ptr<ConvKernel> kernel_;
};

class ConvOp : public TypedOperator<ConvOp, ConvOpBase> {
 public:
  static constexpr char kType[] = "conv";
  static constexpr char kSignature[] =
      "(x [N, C, H, W], w [O, C, kh, kw]) -> y [N, O, Ho, Wo]; attrs: stride (int, 1) or "
      "stride_h/stride_w, pad (int, 0) or pad_h/pad_w, engine (string, auto|onednn|im2col), "
      "gpu_algorithm (int, -1)";
  explicit ConvOp(Attrs attrs) : TypedOperator(std::move(attrs), kType) {}
  int num_inputs() const override { return 2; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  OpCost cost(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) const override;
  ChannelBlocking channel_blocking(const std::vector<Shape>& inputs, int block) const override;
  bool differentiable() const override { return true; }
  GradientSpec gradient() const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class ConvBiasReluOp : public TypedOperator<ConvBiasReluOp, ConvOpBase> {
 public:
  static constexpr char kType[] = "conv_bias_relu";
  static constexpr char kSignature[] =
      "(x [N, C, H, W], w [O, C, kh, kw], b [O]) -> y = max(conv(x, w) + b, 0); attrs: as conv";
  explicit ConvBiasReluOp(Attrs attrs) : TypedOperator(std::move(attrs), kType) {}
  int num_inputs() const override { return 3; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  OpCost cost(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) const override;
  ChannelBlocking channel_blocking(const std::vector<Shape>& inputs, int block) const override;
  bool differentiable() const override { return true; }
  GradientSpec gradient() const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class ConvGradDataOp : public TypedOperator<ConvGradDataOp, ConvOpBase> {
 public:
  static constexpr char kType[] = "conv_grad_data";
  static constexpr char kSignature[] = "(dy, w, x) -> dx; attrs: as conv";
  explicit ConvGradDataOp(Attrs attrs) : TypedOperator(std::move(attrs), kType) {}
  int num_inputs() const override { return 3; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  OpCost cost(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) const override;
  ChannelBlocking channel_blocking(const std::vector<Shape>& inputs, int block) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class ConvGradWeightOp : public TypedOperator<ConvGradWeightOp, ConvOpBase> {
 public:
  static constexpr char kType[] = "conv_grad_weight";
  static constexpr char kSignature[] = "(dy, x, w) -> dw; attrs: as conv, deterministic (int, 1)";
  explicit ConvGradWeightOp(Attrs attrs) : TypedOperator(std::move(attrs), kType) {}
  int num_inputs() const override { return 3; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  OpCost cost(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) const override;
  ChannelBlocking channel_blocking(const std::vector<Shape>& inputs, int block) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

}  // namespace purine
