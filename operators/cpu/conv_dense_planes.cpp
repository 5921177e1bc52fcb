// Convolutions in which every output pixel sees every input pixel, as dense layers. GoogLeNet's
// last inceptions at 28x28 see 2x2 and 1x1 planes, where a 3x3 kernel padded by 1 (or a 5x5
// padded by 2) reaches the whole input from each output pixel: image by image, or in image
// groups, the GEMMs there are tiny (an inner dimension of 4 pixels, or taps multiplied by
// padding). With x as [N, C P] and y as [N, O Q] (P, Q: the input and output planes' pixels;
// NCHW is already that layout), the convolution is the product with a dense matrix
// wd [O Q, C P] whose element (o q, c p) is the tap of w [O, C, kh, kw] that joins input pixel p
// to output pixel q:
//   forward:          y [N, O Q]   = x wd^T (then max(y + bias, 0) with a bias)
//   backward data:    dx [N, C P]  = dy wd
//   backward weights: dwd [O Q, C P] = dy^T x, then dw's each tap = the sum of the elements of
//                     dwd that use it (in (q, p) order; taps that join no pair: zero)
// each a blocked_sgemm (fixed blocks, so the bits do not depend on the thread count). These are
// the convolution's multiply-adds that meet the input and no others. With one output pixel, wd
// is the kernel's taps that meet the input, or w itself when the kernel is the input's size.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "operators/cpu/blocked_sgemm.hpp"
#include "operators/cpu/conv_kernel.hpp"
#include "operators/cpu/thread_workspace.hpp"
#include "operators/cpu/threading.hpp"

namespace purine {

namespace {

// wd's floats at most (64 MB).
constexpr int64_t kMaxDenseFloats = int64_t{1} << 24;

class DensePlanesKernel : public ConvKernel {
 public:
  DensePlanesKernel(ConvDirection direction, const ConvGeometry& g, int threads, bool bias_relu)
      : ConvKernel(direction, g, threads, bias_relu),
        p_(g.h * g.w),
        q_(g.ho * g.wo),
        whole_kernel_(q_ == 1 && g.kh == g.h && g.kw == g.w),
        dense_at_(workspace_.add(whole_kernel_ ? 0 : sizeof(float) * g.o * q_ * g.c * p_)) {
    std::vector<bool> seen(g.kh * g.kw, false);
    for (int64_t oh = 0; oh < g.ho; ++oh)
      for (int64_t ow = 0; ow < g.wo; ++ow)
        for (int64_t ih = 0; ih < g.h; ++ih)
          for (int64_t iw = 0; iw < g.w; ++iw) {
            const int64_t i = ih - oh * g.stride_h + g.pad_h, j = iw - ow * g.stride_w + g.pad_w;
            tap_of_pair_.push_back(i * g.kw + j);
            first_of_tap_.push_back(!seen[i * g.kw + j]);
            seen[i * g.kw + j] = true;
          }
  }

  std::string name() const override { return "gemm:dense planes"; }

  void run(const float* a, const float* b, const float* bias, float* out) override {
    OmpThreads scope(team_);
    const ConvGeometry& g = g_;
    const int64_t rows = g.o * q_, columns = g.c * p_;  // wd's
    float* dense = workspace_floats(thread_workspace(workspace_.bytes()), dense_at_);
    switch (direction_) {
      case ConvDirection::kForward: {
        const float* wd = expand(b, dense);
        blocked_sgemm('N', 'T', g.n, rows, columns, a, columns, wd, columns, out, rows);
        if (bias_relu_) {
          parallel_for(g.n * g.o, g.n * rows > kParallelMinArithmetic, [&](int64_t i) {
            add_bias_relu(out + i * q_, bias[i % g.o], q_, out + i * q_);
          });
        }
        break;
      }
      case ConvDirection::kBackwardData:
        blocked_sgemm('N', 'N', g.n, columns, rows, a, rows, expand(b, dense), columns, out,
                      columns);
        break;
      case ConvDirection::kBackwardWeights:
        if (whole_kernel_) {
          blocked_sgemm('T', 'N', rows, columns, g.n, a, rows, b, columns, out, columns);
        } else {
          blocked_sgemm('T', 'N', rows, columns, g.n, a, rows, b, columns, dense, columns);
          fold(dense, out);
        }
        break;
    }
  }

 private:
  // wd [O Q, C P] from w [O, C, kh, kw] (w itself for a kernel the input's size): row (o, q) is
  // w[o, c, tap(q, p)] for c, then p.
  const float* expand(const float* w, float* dense) const {
    if (whole_kernel_) return w;
    const ConvGeometry& g = g_;
    const int64_t taps = g.kh * g.kw, columns = g.c * p_;
    parallel_for(g.o * q_, g.o * q_ * columns > kParallelMinCopy, [&](int64_t row) {
      const float* from = w + row / q_ * g.c * taps;
      float* to = dense + row * columns;
      const int64_t* tap = tap_of_pair_.data() + row % q_ * p_;
      // 2x2 planes: the row in one pass, its four taps held in registers (the 20 such ops of
      // GoogLeNet-28's forward and data gradients: 4.8 / 5.4 -> 4.1 / 4.5 ms in training,
      // against a pass per pixel).
      if (p_ == 4) {
        const int64_t t0 = tap[0], t1 = tap[1], t2 = tap[2], t3 = tap[3];
        for (int64_t c = 0; c < g.c; ++c) {
          const float* f = from + c * taps;
          float* d = to + c * 4;
          d[0] = f[t0];
          d[1] = f[t1];
          d[2] = f[t2];
          d[3] = f[t3];
        }
        return;
      }
      for (int64_t p = 0; p < p_; ++p) {
        const int64_t t = tap[p];
        for (int64_t c = 0; c < g.c; ++c) to[c * p_ + p] = from[c * taps + t];
      }
    });
    return dense;
  }

  // dw [O, C, kh, kw] from dwd [O Q, C P]: each tap the sum of its pairs' elements in (q, p)
  // order, from the first (a tap of one pair takes its element as it is), zero for none; a pair
  // at a time over c.
  void fold(const float* dense, float* dw) const {
    const ConvGeometry& g = g_;
    const int64_t taps = g.kh * g.kw, columns = g.c * p_;
    parallel_for(g.o, g.o * q_ * columns > kParallelMinCopy, [&](int64_t o) {
      float* to = dw + o * g.c * taps;
      std::fill(to, to + g.c * taps, 0.0f);
      for (int64_t pair = 0; pair < q_ * p_; ++pair) {
        const float* from = dense + (o * q_ + pair / p_) * columns + pair % p_;
        const int64_t t = tap_of_pair_[pair];
        if (first_of_tap_[pair]) {
          for (int64_t c = 0; c < g.c; ++c) to[c * taps + t] = from[c * p_];
        } else {
          for (int64_t c = 0; c < g.c; ++c) to[c * taps + t] += from[c * p_];
        }
      }
    });
  }

  const int64_t p_, q_;      // the input's and the output's plane pixels
  const bool whole_kernel_;  // one output pixel, the kernel the input's size: wd is w
  // Per pair q P + p: the tap joining output pixel q to input pixel p, and whether the pair is
  // its tap's first in (q, p) order.
  std::vector<int64_t> tap_of_pair_;
  std::vector<uint8_t> first_of_tap_;
  WorkspaceLayout workspace_;
  const size_t dense_at_;  // wd, or dwd
};

}  // namespace

bool dense_planes_fit(const ConvGeometry& g) {
  // Every output pixel's window covers the whole input: the first starts before the input's first
  // row and column, the last ends after its last (so with a stride none is skipped).
  const bool rows = (g.ho - 1) * g.stride_h - g.pad_h <= 0 && g.kh - g.pad_h >= g.h;
  const bool cols = (g.wo - 1) * g.stride_w - g.pad_w <= 0 && g.kw - g.pad_w >= g.w;
  return rows && cols && g.o * g.ho * g.wo * g.c * g.h * g.w <= kMaxDenseFloats;
}

std::unique_ptr<ConvKernel> make_dense_planes_kernel(ConvDirection direction, const ConvGeometry& g,
                                                     int threads, bool bias_relu) {
  return std::make_unique<DensePlanesKernel>(direction, g, threads, bias_relu);
}

}  // namespace purine
