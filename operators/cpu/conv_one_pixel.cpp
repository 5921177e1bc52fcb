// Convolutions whose output plane is one pixel, as dense layers. GoogLeNet's last inceptions at
// 28x28 see 1x1 planes, and their 3x3 and 5x5 kernels are padded so that only the centre tap
// meets the input: image by image (or in image groups) the GEMMs multiply the other 8 or 24 taps
// by columns of zeros, and move one float per copy. Here the taps that meet the input, w
// cropped to wc [O, C H W], make the convolution a product of whole matrices:
//   forward:          y [N, O]      = x [N, C H W] wc^T (then max(y + bias, 0) with a bias)
//   backward data:    dx [N, C H W] = dy [N, O] wc
//   backward weights: dwc [O, C H W] = dy^T x, the other taps of dw zero
// each a blocked_sgemm (fixed blocks, so the bits do not depend on the thread count).
#include "operators/cpu/blocked_sgemm.hpp"
#include "operators/cpu/conv_kernel.hpp"
#include "operators/cpu/thread_workspace.hpp"

namespace purine {

namespace {

class OnePixelKernel : public ConvKernel {
 public:
  OnePixelKernel(ConvDirection direction, const ConvGeometry& g, int threads, bool bias_relu)
      : ConvKernel(direction, g, threads, bias_relu),
        k_(g.c * g.h * g.w),
        whole_kernel_(g.kh == g.h && g.kw == g.w),
        cropped_at_(workspace_.add(whole_kernel_ ? 0 : sizeof(float) * g.o * k_)) {}

  std::string name() const override { return "gemm:one pixel"; }

  void run(const float* a, const float* b, const float* bias, float* out) override {
    OmpThreads scope(team_);
    const ConvGeometry& g = g_;
    float* cropped = workspace_floats(thread_workspace(workspace_.bytes()), cropped_at_);
    switch (direction_) {
      case ConvDirection::kForward: {
        const float* wc = crop(b, cropped);
        blocked_sgemm('N', 'T', g.n, g.o, k_, a, k_, wc, k_, out, g.o);
        if (bias_relu_) {
          parallel_for(g.n, g.n * g.o > kParallelMinArithmetic,
                       [&](int64_t i) { add_bias_relus(bias, out + i * g.o); });
        }
        break;
      }
      case ConvDirection::kBackwardData:
        blocked_sgemm('N', 'N', g.n, k_, g.o, a, g.o, crop(b, cropped), k_, out, k_);
        break;
      case ConvDirection::kBackwardWeights:
        if (whole_kernel_) {
          blocked_sgemm('T', 'N', g.o, k_, g.n, a, g.o, b, k_, out, k_);
        } else {
          blocked_sgemm('T', 'N', g.o, k_, g.n, a, g.o, b, k_, cropped, k_);
          widen_weight_gradient(g_, taps(), cropped, out);
        }
        break;
    }
  }

 private:
  // The taps of w [O, C, kh, kw] that meet the input: w[o, c, h + pad_h, w + pad_w] for the
  // input's h, w (w itself when the kernel is the input's size).
  const float* crop(const float* w, float* cropped) const {
    if (whole_kernel_) return w;
    crop_weights(g_, taps(), w, cropped);
    return cropped;
  }
  TapBlock taps() const { return {g_.pad_h, g_.pad_w, g_.h, g_.w}; }

  // row[o] = max(row[o] + bias[o], 0): one image's outputs (add_bias_relu's arithmetic).
  void add_bias_relus(const float* bias, float* row) const {
    for (int64_t o = 0; o < g_.o; ++o) row[o] = formula::Relu()(row[o] + bias[o]);
  }

  const int64_t k_;          // C H W: the taps that meet the input, per output channel
  const bool whole_kernel_;  // the kernel is the input's size: no padding, wc is w
  WorkspaceLayout workspace_;
  const size_t cropped_at_;  // wc, or dwc
};

}  // namespace

bool one_pixel_fits(const ConvGeometry& g) {
  // One output pixel, and every input pixel under a tap: with stride 1 both hold once the kernel
  // spans the padded input; a larger stride could skip input rows.
  return g.ho == 1 && g.wo == 1 && g.kh - g.pad_h >= g.h && g.kw - g.pad_w >= g.w;
}

std::unique_ptr<ConvKernel> make_one_pixel_kernel(ConvDirection direction, const ConvGeometry& g,
                                                  int threads, bool bias_relu) {
  return std::make_unique<OnePixelKernel>(direction, g, threads, bias_relu);
}

}  // namespace purine
