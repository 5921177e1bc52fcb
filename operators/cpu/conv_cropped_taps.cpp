// Stride-1 convolutions whose kernel overhangs the padded input so far that its outer rows or
// columns of taps meet only padding at every output position: GoogLeNet's 5x5 kernels padded by
// 2 over 2x2 planes at 28x28, where only the middle 3x3 taps ever meet the input. Those taps
// contribute nothing (padding times weight) and get a zero gradient, so the convolution is the
// same as one of the middle taps alone with the padding less the dropped rows: the weights are
// cropped (forward, data gradient) or the cropped gradient is widened with zeros (weight
// gradient) around a kernel that make_kernel chooses for the smaller geometry.
#include <algorithm>
#include <utility>
#include <vector>

#include "operators/cpu/conv_kernel.hpp"

namespace purine {

namespace {

// The taps along one axis that meet the input at some output position (stride 1): from
// pad - (out - 1) to in - 1 + pad, within the kernel.
std::pair<int64_t, int64_t> live_taps(int64_t in, int64_t out, int64_t kernel, int64_t pad) {
  return {std::max<int64_t>(0, pad - (out - 1)), std::min(kernel - 1, in - 1 + pad)};
}

class CroppedTapsKernel : public ConvKernel {
 public:
  CroppedTapsKernel(ConvDirection direction, const ConvGeometry& g, const ConvGeometry& inner,
                    std::unique_ptr<ConvKernel> kernel, int threads)
      : ConvKernel(direction, g, threads),
        inner_g_(inner),
        inner_(std::move(kernel)),
        block_{g.pad_h - inner.pad_h, g.pad_w - inner.pad_w, inner.kh, inner.kw},
        cropped_(g.o * g.c * inner.kh * inner.kw) {}

  std::string name() const override {
    return "cropped " + std::to_string(inner_g_.kh) + "x" + std::to_string(inner_g_.kw) + ":" +
           inner_->name();
  }

  void run(const float* a, const float* b, const float* bias, float* out) override {
    // The inner kernel takes the calling thread's workspace: the cropped weights have a buffer
    // of their own.
    float* cropped = cropped_.data();
    OmpThreads scope(team_);
    if (direction_ == ConvDirection::kBackwardWeights) {
      inner_->run(a, b, nullptr, cropped);
      widen_weight_gradient(g_, block_, cropped, out);
    } else {
      crop_weights(g_, block_, b, cropped);
      inner_->run(a, cropped, bias, out);
    }
  }

 private:
  const ConvGeometry inner_g_;
  const std::unique_ptr<ConvKernel> inner_;
  const TapBlock block_;        // the live taps
  std::vector<float> cropped_;  // the cropped weights, or their gradient
};

}  // namespace

void crop_weights(const ConvGeometry& g, const TapBlock& b, const float* w, float* cropped) {
  const int64_t taps = g.kh * g.kw;
  parallel_for(g.o * g.c, g.o * g.c * taps > kParallelMinCopy, [&](int64_t oc) {
    const float* from = w + oc * taps + b.first_h * g.kw + b.first_w;
    float* to = cropped + oc * b.kh * b.kw;
    for (int64_t i = 0; i < b.kh; ++i)
      for (int64_t j = 0; j < b.kw; ++j) to[i * b.kw + j] = from[i * g.kw + j];
  });
}

void widen_weight_gradient(const ConvGeometry& g, const TapBlock& b, const float* cropped,
                           float* dw) {
  const int64_t taps = g.kh * g.kw;
  parallel_for(g.o * g.c, g.o * g.c * taps > kParallelMinCopy, [&](int64_t oc) {
    float* to = dw + oc * taps;
    for (int64_t t = 0; t < taps; ++t) to[t] = 0.0f;
    const float* from = cropped + oc * b.kh * b.kw;
    for (int64_t i = 0; i < b.kh; ++i)
      for (int64_t j = 0; j < b.kw; ++j)
        to[(b.first_h + i) * g.kw + b.first_w + j] = from[i * b.kw + j];
  });
}

bool crop_taps(const ConvGeometry& g, ConvGeometry* inner) {
  if (g.stride_h != 1 || g.stride_w != 1 || g.n == 0) return false;
  const auto [top, bottom] = live_taps(g.h, g.ho, g.kh, g.pad_h);
  const auto [left, right] = live_taps(g.w, g.wo, g.kw, g.pad_w);
  if (top == 0 && left == 0 && bottom == g.kh - 1 && right == g.kw - 1) return false;
  *inner = g;
  inner->kh = bottom - top + 1;
  inner->kw = right - left + 1;
  inner->pad_h = g.pad_h - top;
  inner->pad_w = g.pad_w - left;
  return true;
}

std::unique_ptr<ConvKernel> make_cropped_taps_kernel(ConvDirection direction, const ConvGeometry& g,
                                                     const ConvGeometry& inner,
                                                     std::unique_ptr<ConvKernel> kernel,
                                                     int threads) {
  return std::make_unique<CroppedTapsKernel>(direction, g, inner, std::move(kernel), threads);
}

}  // namespace purine
