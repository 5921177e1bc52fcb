// The transforms of Winograd's F(2x2, 5x5) (winograd_steps.hpp): 6x6 input tiles, the points
// 0, 1, -1, 2, -2 and infinity (those of the common F(4x4, 3x3), whose input transform it shares),
// 36 products for 4 output pixels where the direct convolution multiplies 100 times. In 1-D:
//   B' = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
//   G  = [1/4 0 0 0 0; -1/6 x5; -1/6 1/6 -1/6 1/6 -1/6; 1 2 4 8 16 / 24; 1 -2 4 -8 16 / 24;
//         0 0 0 0 1]
//   A' = [1 1 1 1 1 0; 0 1 -1 2 -2 1]
// Compiled for AVX2 and FMA like winograd_steps.cpp.
#include <immintrin.h>

#include <algorithm>

#include "operators/cpu/winograd_steps.hpp"

namespace purine::winograd {

namespace {

#define PURINE_AVX2 __attribute__((target("avx2,fma")))
#define PURINE_AVX2_INLINE inline __attribute__((target("avx2,fma"), always_inline))

constexpr int kAlpha = 6;

PURINE_AVX2_INLINE __m256 times(float c, __m256 x) { return _mm256_mul_ps(_mm256_set1_ps(c), x); }

// y = B' x.
PURINE_AVX2_INLINE void input_1d(const __m256* x, __m256* y) {
  const __m256 four = _mm256_set1_ps(4.0f), two = _mm256_set1_ps(2.0f);
  y[0] = _mm256_fmadd_ps(four, x[0], _mm256_fnmadd_ps(_mm256_set1_ps(5.0f), x[2], x[4]));
  y[1] = _mm256_fnmadd_ps(four, _mm256_add_ps(x[1], x[2]), _mm256_add_ps(x[3], x[4]));
  y[2] = _mm256_fmadd_ps(four, _mm256_sub_ps(x[1], x[2]), _mm256_sub_ps(x[4], x[3]));
  y[3] = _mm256_fmadd_ps(two, _mm256_sub_ps(x[3], x[1]), _mm256_sub_ps(x[4], x[2]));
  y[4] = _mm256_fnmadd_ps(two, _mm256_sub_ps(x[3], x[1]), _mm256_sub_ps(x[4], x[2]));
  y[5] = _mm256_fmadd_ps(four, x[1], _mm256_fnmadd_ps(_mm256_set1_ps(5.0f), x[3], x[5]));
}

// y = A' m (2 of 6).
PURINE_AVX2_INLINE void output_1d(const __m256* m, __m256* y) {
  y[0] = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(m[0], m[1]), _mm256_add_ps(m[2], m[3])), m[4]);
  y[1] = _mm256_add_ps(
      _mm256_fmadd_ps(_mm256_set1_ps(2.0f), _mm256_sub_ps(m[3], m[4]), _mm256_sub_ps(m[1], m[2])),
      m[5]);
}

// z = A y (6 of 2).
PURINE_AVX2_INLINE void output_grad_1d(__m256 y0, __m256 y1, __m256* z) {
  const __m256 two = _mm256_set1_ps(2.0f);
  z[0] = y0;
  z[1] = _mm256_add_ps(y0, y1);
  z[2] = _mm256_sub_ps(y0, y1);
  z[3] = _mm256_fmadd_ps(two, y1, y0);
  z[4] = _mm256_fnmadd_ps(two, y1, y0);
  z[5] = y1;
}

// u = G g (6 of 5).
PURINE_AVX2_INLINE void kernel_1d(const __m256* g, __m256* u) {
  const __m256 even = _mm256_add_ps(_mm256_add_ps(g[0], g[2]), g[4]),
               odd = _mm256_add_ps(g[1], g[3]);
  const __m256 even4 = _mm256_fmadd_ps(_mm256_set1_ps(16.0f), g[4],
                                       _mm256_fmadd_ps(_mm256_set1_ps(4.0f), g[2], g[0])),
               odd4 = _mm256_fmadd_ps(_mm256_set1_ps(8.0f), g[3], _mm256_add_ps(g[1], g[1]));
  u[0] = times(0.25f, g[0]);
  u[1] = times(-1.0f / 6, _mm256_add_ps(even, odd));
  u[2] = times(-1.0f / 6, _mm256_sub_ps(even, odd));
  u[3] = times(1.0f / 24, _mm256_add_ps(even4, odd4));
  u[4] = times(1.0f / 24, _mm256_sub_ps(even4, odd4));
  u[5] = g[4];
}

// g = G' d (5 of 6).
PURINE_AVX2_INLINE void kernel_grad_1d(const __m256* d, __m256* g) {
  const __m256 sum12 = _mm256_add_ps(d[1], d[2]), diff21 = _mm256_sub_ps(d[2], d[1]),
               sum34 = _mm256_add_ps(d[3], d[4]), diff34 = _mm256_sub_ps(d[3], d[4]);
  const __m256 sixth = _mm256_set1_ps(1.0f / 6);
  g[0] = _mm256_add_ps(_mm256_fnmadd_ps(sixth, sum12, times(0.25f, d[0])), times(1.0f / 24, sum34));
  g[1] = _mm256_fmadd_ps(sixth, diff21, times(1.0f / 12, diff34));
  g[2] = _mm256_mul_ps(sixth, _mm256_sub_ps(sum34, sum12));
  g[3] = _mm256_fmadd_ps(sixth, diff21, times(1.0f / 3, diff34));
  g[4] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(2.0f / 3), sum34, times(-1.0f / 6, sum12)),
                       d[5]);
}

PURINE_AVX2 void inputs(const float* packed, int64_t groups, int64_t hp, int64_t wp, int64_t tile_w,
                        int64_t first, int64_t tiles, float* v, int64_t ld, int64_t step) {
  int64_t th = first / tile_w, tw = first % tile_w;
  for (int64_t t = 0; t < tiles; ++t, tw = tw + 1 == tile_w ? (++th, 0) : tw + 1) {
    for (int64_t group = 0; group < groups; ++group) {
      const float* d = packed + ((group * hp + 2 * th) * wp + 2 * tw) * kLanes;
      __m256 columns[kAlpha][kAlpha];  // [s][i]: B' applied down each column s
      for (int s = 0; s < kAlpha; ++s) {
        __m256 x[kAlpha];
        for (int r = 0; r < kAlpha; ++r) x[r] = _mm256_loadu_ps(d + (r * wp + s) * kLanes);
        input_1d(x, columns[s]);
      }
      float* out = v + t * ld + group * kLanes;
      for (int i = 0; i < kAlpha; ++i) {
        __m256 row[kAlpha], y[kAlpha];
        for (int s = 0; s < kAlpha; ++s) row[s] = columns[s][i];
        input_1d(row, y);
        for (int j = 0; j < kAlpha; ++j) _mm256_storeu_ps(out + (i * kAlpha + j) * step, y[j]);
      }
    }
  }
}

PURINE_AVX2 void outputs(const float* m, int64_t ld, int64_t step, int64_t tiles, int64_t first,
                         int64_t tile_w, int64_t out_groups, int64_t oh, int64_t ow,
                         float* packed) {
  int64_t th = first / tile_w, tw = first % tile_w;
  for (int64_t t = 0; t < tiles; ++t, tw = tw + 1 == tile_w ? (++th, 0) : tw + 1) {
    for (int64_t group = 0; group < out_groups; ++group) {
      const float* in = m + t * ld + group * kLanes;
      __m256 columns[kAlpha][2];  // [j][r]: A' applied down each column j
      for (int j = 0; j < kAlpha; ++j) {
        __m256 x[kAlpha];
        for (int i = 0; i < kAlpha; ++i) x[i] = _mm256_loadu_ps(in + (i * kAlpha + j) * step);
        output_1d(x, columns[j]);
      }
      float* out = packed + ((group * oh + 2 * th) * ow + 2 * tw) * kLanes;
      for (int r = 0; r < 2; ++r) {
        __m256 row[kAlpha], y[2];
        for (int j = 0; j < kAlpha; ++j) row[j] = columns[j][r];
        output_1d(row, y);
        _mm256_storeu_ps(out + r * ow * kLanes, y[0]);
        _mm256_storeu_ps(out + (r * ow + 1) * kLanes, y[1]);
      }
    }
  }
}

PURINE_AVX2 void output_grads(const float* packed, int64_t groups, int64_t oh, int64_t ow,
                              int64_t tile_w, int64_t first, int64_t tiles, float* z, int64_t ld,
                              int64_t step) {
  int64_t th = first / tile_w, tw = first % tile_w;
  for (int64_t t = 0; t < tiles; ++t, tw = tw + 1 == tile_w ? (++th, 0) : tw + 1) {
    for (int64_t group = 0; group < groups; ++group) {
      const float* dy = packed + ((group * oh + 2 * th) * ow + 2 * tw) * kLanes;
      __m256 columns[2][kAlpha];  // [c][i]: A applied down each of the 2 columns
      for (int c = 0; c < 2; ++c)
        output_grad_1d(_mm256_loadu_ps(dy + c * kLanes), _mm256_loadu_ps(dy + (ow + c) * kLanes),
                       columns[c]);
      float* out = z + t * ld + group * kLanes;
      for (int i = 0; i < kAlpha; ++i) {
        __m256 y[kAlpha];
        output_grad_1d(columns[0][i], columns[1][i], y);
        for (int j = 0; j < kAlpha; ++j) _mm256_storeu_ps(out + (i * kAlpha + j) * step, y[j]);
      }
    }
  }
}

PURINE_AVX2 void kernels(const float* w, const TapStrides& taps, int64_t in, int64_t out,
                         int64_t in8, int64_t out8, float* u) {
  for (int64_t i = 0; i < in8; ++i) {
    for (int64_t o0 = 0; o0 < out8; o0 += kLanes) {
      __m256 columns[5][kAlpha];  // [b][i]: G applied down each column b
      for (int b = 0; b < 5; ++b) {
        __m256 g[5];
        for (int a = 0; a < 5; ++a) {
          alignas(32) float lanes[kLanes];
          for (int64_t l = 0; l < kLanes; ++l)
            lanes[l] =
                i < in && o0 + l < out
                    ? w[taps.at + (o0 + l) * taps.so + i * taps.si + a * taps.sa + b * taps.sb]
                    : 0.0f;
          g[a] = _mm256_load_ps(lanes);
        }
        kernel_1d(g, columns[b]);
      }
      for (int r = 0; r < kAlpha; ++r) {
        __m256 row[5], y[kAlpha];
        for (int b = 0; b < 5; ++b) row[b] = columns[b][r];
        kernel_1d(row, y);
        for (int s = 0; s < kAlpha; ++s)
          _mm256_storeu_ps(u + ((r * kAlpha + s) * in8 + i) * out8 + o0, y[s]);
      }
    }
  }
}

PURINE_AVX2 void kernel_gradient(const float* du, int64_t in, int64_t out, int64_t in8,
                                 int64_t out8, float* dw) {
  for (int64_t i = 0; i < in; ++i) {
    for (int64_t o0 = 0; o0 < out; o0 += kLanes) {
      __m256 columns[kAlpha][5];  // [s][a]: G' applied down each column s
      for (int s = 0; s < kAlpha; ++s) {
        __m256 d[kAlpha];
        for (int r = 0; r < kAlpha; ++r)
          d[r] = _mm256_loadu_ps(du + ((r * kAlpha + s) * in8 + i) * out8 + o0);
        kernel_grad_1d(d, columns[s]);
      }
      alignas(32) float taps[25][kLanes];
      for (int a = 0; a < 5; ++a) {
        __m256 row[kAlpha], g[5];
        for (int s = 0; s < kAlpha; ++s) row[s] = columns[s][a];
        kernel_grad_1d(row, g);
        for (int b = 0; b < 5; ++b) _mm256_store_ps(taps[a * 5 + b], g[b]);
      }
      for (int64_t l = 0; l < std::min(kLanes, out - o0); ++l)
        for (int tap = 0; tap < 25; ++tap) dw[((o0 + l) * in + i) * 25 + tap] = taps[tap][l];
    }
  }
}

}  // namespace

const Transforms& transforms_5x5() {
  static const Transforms transforms{5,       kAlpha,         inputs, outputs, output_grads,
                                     kernels, kernel_gradient};
  return transforms;
}

}  // namespace purine::winograd
