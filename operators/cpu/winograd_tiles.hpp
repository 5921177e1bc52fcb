// The 2-D transforms of Winograd's F(m x m, r x r) over tiles of 8-channel vectors, written once
// for every tile and kernel size (winograd_steps.cpp: F(2x2, 3x3); winograd_6x6.cpp: F(2x2, 5x5)
// and F(4x4, 3x3)) from a Rule's 1-D transforms:
//   struct Rule {
//     static constexpr int m, r, alpha;                                // alpha = m + r - 1
//     static void input(const __m256* x, __m256* y);                   // y = B' x, alpha of alpha
//     static void output(const __m256* x, __m256* y);                  // y = A' x, m of alpha
//     static void output_grad(const __m256* y, __m256* z);             // z = A y, alpha of m
//     static void kernel(const __m256* g, __m256* u);                  // u = G g, alpha of r
//     static void kernel_grad(const __m256* d, __m256* g);             // g = G' d, r of alpha
//   };
// each applied down the columns of a tile, then along its rows. Only for files compiled with
// these functions' AVX2 and FMA target (the Rule's functions must carry it too).
#pragma once

#include <immintrin.h>

#include <algorithm>

#include "operators/cpu/winograd_steps.hpp"

#define PURINE_WINOGRAD_AVX2 __attribute__((target("avx2,fma")))
#define PURINE_WINOGRAD_AVX2_INLINE inline __attribute__((target("avx2,fma"), always_inline))

namespace purine::winograd {

// y = F(F(x)')' for one kIn x kIn block x of 8-channel vectors, F a 1-D transform of kIn values
// to kOut: x[r][s] at in + r in_row + s in_col, y[i][j] stored at out + i out_row + j out_col.
template <int kIn, int kOut, void (*F)(const __m256*, __m256*)>
PURINE_WINOGRAD_AVX2_INLINE void transform_2d(const float* in, int64_t in_row, int64_t in_col,
                                              float* out, int64_t out_row, int64_t out_col) {
  __m256 columns[kIn][kOut];  // [s][i]: F down column s
  for (int s = 0; s < kIn; ++s) {
    __m256 x[kIn];
    for (int r = 0; r < kIn; ++r) x[r] = _mm256_loadu_ps(in + r * in_row + s * in_col);
    F(x, columns[s]);
  }
  for (int i = 0; i < kOut; ++i) {
    __m256 row[kIn], y[kOut];
    for (int s = 0; s < kIn; ++s) row[s] = columns[s][i];
    F(row, y);
    for (int j = 0; j < kOut; ++j) _mm256_storeu_ps(out + i * out_row + j * out_col, y[j]);
  }
}

// fn(t, th, tw) for `tiles` tiles from `first` on, tile_w tiles a row: the t-th of them, at tile
// row th and column tw.
template <class Fn>
PURINE_WINOGRAD_AVX2_INLINE void each_tile(int64_t first, int64_t tiles, int64_t tile_w, Fn fn) {
  int64_t th = first / tile_w, tw = first % tile_w;
  for (int64_t t = 0; t < tiles; ++t, tw = tw + 1 == tile_w ? (++th, 0) : tw + 1) fn(t, th, tw);
}

template <class Rule>
PURINE_WINOGRAD_AVX2 void tile_inputs(const float* packed, int64_t groups, int64_t hp, int64_t wp,
                                      int64_t tile_w, int64_t first, int64_t tiles, float* v,
                                      int64_t ld, int64_t step) {
  constexpr int kA = Rule::alpha, kM = Rule::m;
  each_tile(first, tiles, tile_w, [&](int64_t t, int64_t th, int64_t tw) PURINE_WINOGRAD_AVX2 {
    for (int64_t group = 0; group < groups; ++group)
      transform_2d<kA, kA, Rule::input>(packed + ((group * hp + kM * th) * wp + kM * tw) * kLanes,
                                        wp * kLanes, kLanes, v + t * ld + group * kLanes, kA * step,
                                        step);
  });
}

template <class Rule>
PURINE_WINOGRAD_AVX2 void tile_outputs(const float* m, int64_t ld, int64_t step, int64_t tiles,
                                       int64_t first, int64_t tile_w, int64_t out_groups,
                                       int64_t oh, int64_t ow, float* packed) {
  constexpr int kA = Rule::alpha, kM = Rule::m;
  each_tile(first, tiles, tile_w, [&](int64_t t, int64_t th, int64_t tw) PURINE_WINOGRAD_AVX2 {
    for (int64_t group = 0; group < out_groups; ++group)
      transform_2d<kA, kM, Rule::output>(m + t * ld + group * kLanes, kA * step, step,
                                         packed + ((group * oh + kM * th) * ow + kM * tw) * kLanes,
                                         ow * kLanes, kLanes);
  });
}

template <class Rule>
PURINE_WINOGRAD_AVX2 void tile_output_grads(const float* packed, int64_t groups, int64_t oh,
                                            int64_t ow, int64_t tile_w, int64_t first,
                                            int64_t tiles, float* z, int64_t ld, int64_t step) {
  constexpr int kA = Rule::alpha, kM = Rule::m;
  each_tile(first, tiles, tile_w, [&](int64_t t, int64_t th, int64_t tw) PURINE_WINOGRAD_AVX2 {
    for (int64_t group = 0; group < groups; ++group)
      transform_2d<kM, kA, Rule::output_grad>(
          packed + ((group * oh + kM * th) * ow + kM * tw) * kLanes, ow * kLanes, kLanes,
          z + t * ld + group * kLanes, kA * step, step);
  });
}

template <class Rule>
PURINE_WINOGRAD_AVX2 void tile_kernels(const float* w, const TapStrides& taps, int64_t in,
                                       int64_t out, int64_t in8, int64_t out8, int64_t first,
                                       int64_t last, float* u) {
  constexpr int kA = Rule::alpha, kR = Rule::r;
  for (int64_t i = first; i < last; ++i) {
    for (int64_t o0 = 0; o0 < out8; o0 += kLanes) {
      __m256 columns[kR][kA];  // [b][i]: G down column b
      for (int b = 0; b < kR; ++b) {
        __m256 g[kR];
        for (int a = 0; a < kR; ++a) {
          alignas(32) float lanes[kLanes];
          for (int64_t l = 0; l < kLanes; ++l)
            lanes[l] =
                i < in && o0 + l < out
                    ? w[taps.at + (o0 + l) * taps.so + i * taps.si + a * taps.sa + b * taps.sb]
                    : 0.0f;
          g[a] = _mm256_load_ps(lanes);
        }
        Rule::kernel(g, columns[b]);
      }
      for (int r = 0; r < kA; ++r) {
        __m256 row[kR], y[kA];
        for (int b = 0; b < kR; ++b) row[b] = columns[b][r];
        Rule::kernel(row, y);
        for (int s = 0; s < kA; ++s)
          _mm256_storeu_ps(u + ((r * kA + s) * in8 + i) * out8 + o0, y[s]);
      }
    }
  }
}

template <class Rule>
PURINE_WINOGRAD_AVX2 void tile_kernel_gradient(const float* du, int64_t in, int64_t out,
                                               int64_t in8, int64_t out8, int64_t first,
                                               int64_t last, float* dw) {
  constexpr int kA = Rule::alpha, kR = Rule::r;
  for (int64_t i = first; i < last; ++i) {
    for (int64_t o0 = 0; o0 < out; o0 += kLanes) {
      __m256 columns[kA][kR];  // [s][a]: G' down column s
      for (int s = 0; s < kA; ++s) {
        __m256 d[kA];
        for (int r = 0; r < kA; ++r)
          d[r] = _mm256_loadu_ps(du + ((r * kA + s) * in8 + i) * out8 + o0);
        Rule::kernel_grad(d, columns[s]);
      }
      alignas(32) float taps[kR * kR][kLanes];
      for (int a = 0; a < kR; ++a) {
        __m256 row[kA], g[kR];
        for (int s = 0; s < kA; ++s) row[s] = columns[s][a];
        Rule::kernel_grad(row, g);
        for (int b = 0; b < kR; ++b) _mm256_store_ps(taps[a * kR + b], g[b]);
      }
      for (int64_t l = 0; l < std::min(kLanes, out - o0); ++l)
        for (int tap = 0; tap < kR * kR; ++tap)
          dw[((o0 + l) * in + i) * kR * kR + tap] = taps[tap][l];
    }
  }
}

// The table of a Rule's transforms.
template <class Rule>
const Transforms& transforms_of() {
  static const Transforms transforms{Rule::m,
                                     Rule::r,
                                     Rule::alpha,
                                     tile_inputs<Rule>,
                                     tile_outputs<Rule>,
                                     tile_output_grads<Rule>,
                                     tile_kernels<Rule>,
                                     tile_kernel_gradient<Rule>};
  return transforms;
}

}  // namespace purine::winograd
