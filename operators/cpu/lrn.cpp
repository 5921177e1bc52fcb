#include "operators/lrn.hpp"

#include <algorithm>
#include <cmath>

#include "base/error.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/cpu/vector_isa.hpp"
#include "operators/registry.hpp"

namespace purine {

namespace {

// Spatial positions per work item: a strip of every channel of one sample.
constexpr int64_t kStrip = 256;

// The strips' loops are compiled for AVX-512 and AVX2 too (the build targets plain x86-64), one
// chosen by vector_isa(); the helpers below are inlined into each version. Square roots, divisions,
// products and sums are exact IEEE operations and lrn.cpp builds with -ffp-contract=off (no fused
// multiply-adds), so every version gives the same bits. 2 Zen 5 cores, 2026-11-28:
// docs/MEASUREMENTS.md, "Convolution kernel choices" (LRN's versions).
#define PURINE_LRN_INLINE inline __attribute__((always_inline))

// power[i] = scale[i]^-beta for i < n, with the AlexNet beta = 0.75 done by square roots (the
// branch outside the loops, and lrn.cpp built with -fno-math-errno: the square roots vectorize).
PURINE_LRN_INLINE void inverse_powers(const float* scale, int64_t n, float beta, float* power) {
  if (beta == 0.75f) {
    for (int64_t i = 0; i < n; ++i) {
      const float root = std::sqrt(scale[i]);
      power[i] = 1.0f / (root * std::sqrt(root));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) power[i] = std::pow(scale[i], -beta);
  }
}

// The layout of one call: samples x channels x spatial, cut into work items of one sample and
// up to kStrip spatial positions.
struct Layout {
  int64_t n, c, spatial, strips;
  explicit Layout(const Shape& x)
      : n(x[0]), c(x[1]), spatial(x.count_from(2)), strips((spatial + kStrip - 1) / kStrip) {}
  int64_t items() const { return n * strips; }
};

// out[s] = finish(the sum over channels cc = first..last of term(rows[cc * stride + s])) for
// s < len, each sum from 0 in channel order: the bits of adding every channel into a zeroed
// row, but 16 positions at a time held in registers (adding into the row in memory was half of
// the LRN's time: a load and a store per channel and position).
template <class Term, class Finish>
PURINE_LRN_INLINE void window_sums(const float* rows, int64_t stride, int64_t first, int64_t last,
                                   int64_t len, Term term, Finish finish, float* out) {
  constexpr int64_t kBlock = 16;
  int64_t s = 0;
  for (; s + kBlock <= len; s += kBlock) {
    float sum[kBlock] = {};
    for (int64_t cc = first; cc <= last; ++cc) {
      const float* in = rows + cc * stride + s;
      for (int64_t j = 0; j < kBlock; ++j) sum[j] += term(in[j]);
    }
    for (int64_t j = 0; j < kBlock; ++j) out[s + j] = finish(sum[j]);
  }
  for (; s < len; ++s) {
    float sum = 0.0f;
    for (int64_t cc = first; cc <= last; ++cc) sum += term(rows[cc * stride + s]);
    out[s] = finish(sum);
  }
}

// scale [C, len] for the strip at `x` (pointing at channel 0 of the strip; channels are
// `spatial` apart).
PURINE_LRN_INLINE void compute_scale(const LrnParams& p, const Layout& l, const float* x,
                                     int64_t len, float* scale) {
  const int64_t half = (p.size - 1) / 2;
  const float coef = p.alpha / static_cast<float>(p.size);
  for (int64_t c = 0; c < l.c; ++c) {
    const int64_t first = std::max<int64_t>(0, c - half), last = std::min(l.c - 1, c + half);
    window_sums(
        x, l.spatial, first, last, len, [](float v) { return v * v; },
        [&](float sum) { return p.k + coef * sum; }, scale + c * len);
  }
}

// y = x scale^-beta for one strip: x and y at its channel 0, channels l.spatial apart; scale is
// [C, len] of scratch.
PURINE_LRN_INLINE void forward_strip_body(const LrnParams& p, const Layout& l, const float* x,
                                          int64_t len, float* scale, float* y) {
  compute_scale(p, l, x, len, scale);
  inverse_powers(scale, l.c * len, p.beta, scale);
  for (int64_t c = 0; c < l.c; ++c) {
    const float* in = x + c * l.spatial;
    const float* power = scale + c * len;
    float* out = y + c * l.spatial;
    for (int64_t s = 0; s < len; ++s) out[s] = in[s] * power[s];
  }
}

// One strip's x, y and dy (at channel 0), and its [C, len] scratch (window: [len]).
struct StripInputs {
  const float *x, *y, *dy;
};
struct StripScratch {
  float *scale, *power, *ratio, *window;
};

// dx of one strip.
PURINE_LRN_INLINE void backward_strip_body(const LrnParams& p, const Layout& l, StripInputs in,
                                           int64_t len, StripScratch t, float* dx) {
  const int64_t half = (p.size - 1) / 2;
  const float coef = 2.0f * p.alpha * p.beta / static_cast<float>(p.size);
  compute_scale(p, l, in.x, len, t.scale);
  inverse_powers(t.scale, l.c * len, p.beta, t.power);
  // ratio[c] = dy[c] y[c] / scale[c]
  for (int64_t c = 0; c < l.c; ++c) {
    const float* g = in.dy + c * l.spatial;
    const float* out = in.y + c * l.spatial;
    const float* sc = t.scale + c * len;
    float* r = t.ratio + c * len;
    for (int64_t s = 0; s < len; ++s) r[s] = g[s] * out[s] / sc[s];
  }
  for (int64_t c = 0; c < l.c; ++c) {
    // The channels whose windows contain c: the same symmetric window around c.
    const int64_t first = std::max<int64_t>(0, c - half), last = std::min(l.c - 1, c + half);
    window_sums(
        t.ratio, len, first, last, len, [](float v) { return v; }, [](float sum) { return sum; },
        t.window);
    const float* xc = in.x + c * l.spatial;
    const float* g = in.dy + c * l.spatial;
    const float* pw = t.power + c * len;
    float* out = dx + c * l.spatial;
    for (int64_t s = 0; s < len; ++s) out[s] = g[s] * pw[s] - coef * xc[s] * t.window[s];
  }
}

__attribute__((target("avx512f"))) void forward_avx512(const LrnParams& p, const Layout& l,
                                                       const float* x, int64_t len, float* scale,
                                                       float* y) {
  forward_strip_body(p, l, x, len, scale, y);
}
__attribute__((target("avx2"))) void forward_avx2(const LrnParams& p, const Layout& l,
                                                  const float* x, int64_t len, float* scale,
                                                  float* y) {
  forward_strip_body(p, l, x, len, scale, y);
}
void forward_baseline(const LrnParams& p, const Layout& l, const float* x, int64_t len,
                      float* scale, float* y) {
  forward_strip_body(p, l, x, len, scale, y);
}
__attribute__((target("avx512f"))) void backward_avx512(const LrnParams& p, const Layout& l,
                                                        StripInputs in, int64_t len, StripScratch t,
                                                        float* dx) {
  backward_strip_body(p, l, in, len, t, dx);
}
__attribute__((target("avx2"))) void backward_avx2(const LrnParams& p, const Layout& l,
                                                   StripInputs in, int64_t len, StripScratch t,
                                                   float* dx) {
  backward_strip_body(p, l, in, len, t, dx);
}
void backward_baseline(const LrnParams& p, const Layout& l, StripInputs in, int64_t len,
                       StripScratch t, float* dx) {
  backward_strip_body(p, l, in, len, t, dx);
}

}  // namespace

LrnParams::LrnParams(const Attrs& attrs, const char* type)
    : size(attrs.get_int("size", 5)),
      alpha(static_cast<float>(attrs.get_float("alpha", 1e-4))),
      beta(static_cast<float>(attrs.get_float("beta", 0.75))),
      k(static_cast<float>(attrs.get_float("k", 1.0))) {
  require(size >= 1 && size % 2 == 1, type, ": size is ", size,
          ", expected an odd number of channels, 1 or more");
  require(k > 0 && alpha >= 0, type, ": k is ", k, " and alpha ", alpha,
          ", expected k > 0 and alpha >= 0 (the scale must stay positive)");
}

void LrnOpBase::check_input(const Shape& x) const {
  require(x.ndim() >= 2, type(), ": input 0 (x) has shape ", x,
          ", expected rank 2 or more ([N, C, ...])");
}

std::vector<Shape> LrnOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  check_input(inputs[0]);
  return SameShapeOp::output_shapes(inputs);
}

GradientSpec LrnOp::gradient() const {
  GradientSpec spec;
  spec.ops.push_back(
      {LrnGradOp::kType, attrs_, {input(0), output(0), output_grad(0)}, {input_grad(0)}});
  return spec;
}

void LrnOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                        const std::vector<Tensor*>& outputs, OpContext&) {
  const LrnParams& p = params();
  const Layout l(inputs[0]->shape());
  const float* x = inputs[0]->data();
  float* y = outputs[0]->mutable_data();
  parallel_region(l.n * l.c * l.spatial > kParallelMinNormalization, [&] {
    std::vector<float> scale(l.c * std::min(kStrip, l.spatial));
#pragma omp for schedule(static)
    for (int64_t item = 0; item < l.items(); ++item) {
      const int64_t i = item / l.strips, s0 = (item % l.strips) * kStrip;
      const int64_t len = std::min(kStrip, l.spatial - s0);
      const int64_t base = i * l.c * l.spatial + s0;
      call_for_vector_isa(forward_avx512, forward_avx2, forward_baseline, p, l, x + base, len,
                          scale.data(), y + base);
    }
  });
}

std::vector<Shape> LrnGradOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  check_input(inputs[0]);
  return SameShapeOp::output_shapes(inputs);
}

void LrnGradOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                            const std::vector<Tensor*>& outputs, OpContext&) {
  const LrnParams& p = params();
  const Layout l(inputs[0]->shape());
  const float* x = inputs[0]->data();
  const float* y = inputs[1]->data();
  const float* dy = inputs[2]->data();
  float* dx = outputs[0]->mutable_data();
  parallel_region(l.n * l.c * l.spatial > kParallelMinNormalization, [&] {
    const int64_t strip = std::min(kStrip, l.spatial);
    std::vector<float> scale(l.c * strip), power(l.c * strip), ratio(l.c * strip), window(strip);
#pragma omp for schedule(static)
    for (int64_t item = 0; item < l.items(); ++item) {
      const int64_t i = item / l.strips, s0 = (item % l.strips) * kStrip;
      const int64_t len = std::min(kStrip, l.spatial - s0);
      const int64_t base = i * l.c * l.spatial + s0;
      call_for_vector_isa(backward_avx512, backward_avx2, backward_baseline, p, l,
                          StripInputs{x + base, y + base, dy + base}, len,
                          StripScratch{scale.data(), power.data(), ratio.data(), window.data()},
                          dx + base);
    }
  });
}

PURINE_REGISTER_OPERATOR(LrnOp);
PURINE_REGISTER_OPERATOR(LrnGradOp);

}  // namespace purine
