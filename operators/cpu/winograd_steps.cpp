// The steps of Winograd's convolutions (winograd_steps.hpp) and F(2x2, 3x3)'s transforms (4x4 input
// tiles: B' = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2;
// 0 0 1], A' = [1 1 1 0; 0 1 -1 -1]), each compiled for AVX2
// and FMA (the build targets plain x86-64; conv_winograd.cpp calls them only where the CPU has
// both). The 6x16 register tiles keep their accumulators in registers only with their loops
// unrolled: GCC otherwise stored them to the stack at every step (32 against 70 GFLOP/s on one
// core, docs/MEASUREMENTS.md).
#include "operators/cpu/winograd_steps.hpp"

#include <immintrin.h>

#include <algorithm>

namespace purine::winograd {

namespace {

#define PURINE_AVX2 __attribute__((target("avx2,fma")))
#define PURINE_AVX2_INLINE inline __attribute__((target("avx2,fma"), always_inline))

// The address of channel c's pixel p in image n of a [N, channels, pixels] tensor in `block`s.
inline int64_t element(int64_t n, int64_t channels, int64_t pixels, int block, int64_t c,
                       int64_t p) {
  if (block == 0) return (n * channels + c) * pixels + p;
  return ((n * channels / block + c / block) * pixels + p) * block + c % block;
}

// 8x8 transpose of rows r[0..8) in place.
PURINE_AVX2_INLINE void transpose8(__m256* r) {
  __m256 t[8], s[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    s[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x31);
  }
}

// max(v + b, 0) where there is a bias, else v.
PURINE_AVX2_INLINE __m256 finish(__m256 v, const float* bias, __m256 b) {
  return bias ? _mm256_max_ps(_mm256_add_ps(v, b), _mm256_setzero_ps()) : v;
}

// m[r][j] = the sum over k < depth of v[r][k] u[k][j] for R rows and V vectors of 8 columns.
template <int R, int V>
PURINE_AVX2 void gemm_tile(const float* v, int64_t ldv, const float* u, int64_t ldu, int64_t depth,
                           float* m, int64_t ldm) {
  __m256 acc[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < V; ++j) acc[r][j] = _mm256_setzero_ps();
  for (int64_t k = 0; k < depth; ++k) {
    __m256 col[V];
#pragma GCC unroll 2
    for (int j = 0; j < V; ++j) col[j] = _mm256_loadu_ps(u + k * ldu + j * kLanes);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(v + r * ldv + k);
#pragma GCC unroll 2
      for (int j = 0; j < V; ++j) acc[r][j] = _mm256_fmadd_ps(a, col[j], acc[r][j]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < V; ++j) _mm256_storeu_ps(m + r * ldm + j * kLanes, acc[r][j]);
}

template <int R, int V>
PURINE_AVX2 void gemm_add_tile(const float* v, int64_t ldv, const float* z, int64_t ldz,
                               int64_t depth, float* du, int64_t lddu) {
  __m256 acc[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < V; ++j) acc[r][j] = _mm256_loadu_ps(du + r * lddu + j * kLanes);
  for (int64_t t = 0; t < depth; ++t) {
    __m256 col[V];
#pragma GCC unroll 2
    for (int j = 0; j < V; ++j) col[j] = _mm256_loadu_ps(z + t * ldz + j * kLanes);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(v + t * ldv + r);
#pragma GCC unroll 2
      for (int j = 0; j < V; ++j) acc[r][j] = _mm256_fmadd_ps(a, col[j], acc[r][j]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < V; ++j) _mm256_storeu_ps(du + r * lddu + j * kLanes, acc[r][j]);
}

}  // namespace

PURINE_AVX2 void pack_image(const float* from, int block, int64_t n, int64_t channels, int64_t h,
                            int64_t w, int64_t pad_h, int64_t pad_w, int64_t hp, int64_t wp,
                            float* packed) {
  const int64_t groups = (channels + kLanes - 1) / kLanes, pixels = h * w;
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t group = 0; group < groups; ++group) {
    float* plane = packed + group * hp * wp * kLanes;
    for (int64_t i = 0; i < hp; ++i) {
      float* row = plane + i * wp * kLanes;
      if (i < pad_h || i >= pad_h + h) {
        for (int64_t j = 0; j < wp; ++j) _mm256_storeu_ps(row + j * kLanes, zero);
        continue;
      }
      for (int64_t j = 0; j < pad_w; ++j) _mm256_storeu_ps(row + j * kLanes, zero);
      for (int64_t j = pad_w + w; j < wp; ++j) _mm256_storeu_ps(row + j * kLanes, zero);
    }
    const int64_t c0 = group * kLanes, lanes = std::min(kLanes, channels - c0);
    for (int64_t i = 0; i < h; ++i) {
      float* row = plane + ((pad_h + i) * wp + pad_w) * kLanes;
      const int64_t p0 = i * w;
      if (block != 0) {  // 8 consecutive floats per pixel
        const float* src = from + element(n, channels, pixels, block, c0, p0);
        for (int64_t j = 0; j < w; ++j)
          _mm256_storeu_ps(row + j * kLanes, _mm256_loadu_ps(src + j * block));
        continue;
      }
      int64_t j = 0;
      if (lanes == kLanes) {
        const float* src = from + element(n, channels, pixels, 0, c0, p0);
        for (; j + kLanes <= w; j += kLanes) {
          __m256 r[8];
          for (int l = 0; l < 8; ++l) r[l] = _mm256_loadu_ps(src + l * pixels + j);
          transpose8(r);
          for (int q = 0; q < 8; ++q) _mm256_storeu_ps(row + (j + q) * kLanes, r[q]);
        }
      }
      for (; j < w; ++j)
        for (int64_t l = 0; l < kLanes; ++l)
          row[j * kLanes + l] =
              l < lanes ? from[element(n, channels, pixels, 0, c0 + l, p0 + j)] : 0.0f;
    }
  }
}

PURINE_AVX2 void unpack_image(const float* packed, int64_t hp, int64_t wp, int64_t channels,
                              int64_t h, int64_t w, const float* bias, int block, int64_t n,
                              float* to) {
  const int64_t groups = (channels + kLanes - 1) / kLanes, pixels = h * w;
  alignas(32) float lanes_bias[kLanes] = {};
  for (int64_t group = 0; group < groups; ++group) {
    const float* plane = packed + group * hp * wp * kLanes;
    const int64_t c0 = group * kLanes, lanes = std::min(kLanes, channels - c0);
    if (bias)
      for (int64_t l = 0; l < kLanes; ++l) lanes_bias[l] = l < lanes ? bias[c0 + l] : 0.0f;
    const __m256 b = _mm256_load_ps(lanes_bias);
    for (int64_t i = 0; i < h; ++i) {
      const float* row = plane + i * wp * kLanes;
      const int64_t p0 = i * w;
      if (block != 0) {
        float* dst = to + element(n, channels, pixels, block, c0, p0);
        for (int64_t j = 0; j < w; ++j)
          _mm256_storeu_ps(dst + j * block, finish(_mm256_loadu_ps(row + j * kLanes), bias, b));
        continue;
      }
      int64_t j = 0;
      if (lanes == kLanes) {
        float* dst = to + element(n, channels, pixels, 0, c0, p0);
        for (; j + kLanes <= w; j += kLanes) {
          __m256 r[8];
          for (int q = 0; q < 8; ++q)
            r[q] = finish(_mm256_loadu_ps(row + (j + q) * kLanes), bias, b);
          transpose8(r);
          for (int l = 0; l < 8; ++l) _mm256_storeu_ps(dst + l * pixels + j, r[l]);
        }
      }
      for (; j < w; ++j) {
        alignas(32) float v[kLanes];
        _mm256_store_ps(v, finish(_mm256_loadu_ps(row + j * kLanes), bias, b));
        for (int64_t l = 0; l < lanes; ++l)
          to[element(n, channels, pixels, 0, c0 + l, p0 + j)] = v[l];
      }
    }
  }
}

GemmTile gemm_tile_of(int rows, int vectors) {
  static const GemmTile tiles[kRows][kVectors] = {
      {gemm_tile<1, 1>, gemm_tile<1, 2>}, {gemm_tile<2, 1>, gemm_tile<2, 2>},
      {gemm_tile<3, 1>, gemm_tile<3, 2>}, {gemm_tile<4, 1>, gemm_tile<4, 2>},
      {gemm_tile<5, 1>, gemm_tile<5, 2>}, {gemm_tile<6, 1>, gemm_tile<6, 2>}};
  return tiles[rows - 1][vectors - 1];
}

GemmTile gemm_add_tile_of(int rows, int vectors) {
  static const GemmTile tiles[kRows][kVectors] = {
      {gemm_add_tile<1, 1>, gemm_add_tile<1, 2>}, {gemm_add_tile<2, 1>, gemm_add_tile<2, 2>},
      {gemm_add_tile<3, 1>, gemm_add_tile<3, 2>}, {gemm_add_tile<4, 1>, gemm_add_tile<4, 2>},
      {gemm_add_tile<5, 1>, gemm_add_tile<5, 2>}, {gemm_add_tile<6, 1>, gemm_add_tile<6, 2>}};
  return tiles[rows - 1][vectors - 1];
}

namespace {

PURINE_AVX2 void inputs_3x3(const float* packed, int64_t groups, int64_t hp, int64_t wp,
                            int64_t tile_w, int64_t first, int64_t tiles, float* v, int64_t ld,
                            int64_t step) {
  int64_t th = first / tile_w, tw = first % tile_w;
  for (int64_t t = 0; t < tiles; ++t, tw = tw + 1 == tile_w ? (++th, 0) : tw + 1) {
    for (int64_t group = 0; group < groups; ++group) {
      const float* d = packed + ((group * hp + 2 * th) * wp + 2 * tw) * kLanes;
      __m256 x[4][4];
      for (int r = 0; r < 4; ++r) {
        __m256 row[4];
        for (int s = 0; s < 4; ++s) row[s] = _mm256_loadu_ps(d + (r * wp + s) * kLanes);
        x[r][0] = _mm256_sub_ps(row[0], row[2]);
        x[r][1] = _mm256_add_ps(row[1], row[2]);
        x[r][2] = _mm256_sub_ps(row[2], row[1]);
        x[r][3] = _mm256_sub_ps(row[1], row[3]);
      }
      float* out = v + t * ld + group * kLanes;
      for (int s = 0; s < 4; ++s) {
        _mm256_storeu_ps(out + (0 * 4 + s) * step, _mm256_sub_ps(x[0][s], x[2][s]));
        _mm256_storeu_ps(out + (1 * 4 + s) * step, _mm256_add_ps(x[1][s], x[2][s]));
        _mm256_storeu_ps(out + (2 * 4 + s) * step, _mm256_sub_ps(x[2][s], x[1][s]));
        _mm256_storeu_ps(out + (3 * 4 + s) * step, _mm256_sub_ps(x[1][s], x[3][s]));
      }
    }
  }
}

PURINE_AVX2 void outputs_3x3(const float* m, int64_t ld, int64_t step, int64_t tiles, int64_t first,
                             int64_t tile_w, int64_t out_groups, int64_t oh, int64_t ow,
                             float* packed) {
  int64_t th = first / tile_w, tw = first % tile_w;
  for (int64_t t = 0; t < tiles; ++t, tw = tw + 1 == tile_w ? (++th, 0) : tw + 1) {
    for (int64_t group = 0; group < out_groups; ++group) {
      const float* in = m + t * ld + group * kLanes;
      __m256 s[2][4];
      for (int c = 0; c < 4; ++c) {
        const __m256 m0 = _mm256_loadu_ps(in + (0 * 4 + c) * step),
                     m1 = _mm256_loadu_ps(in + (1 * 4 + c) * step),
                     m2 = _mm256_loadu_ps(in + (2 * 4 + c) * step),
                     m3 = _mm256_loadu_ps(in + (3 * 4 + c) * step);
        s[0][c] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
        s[1][c] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
      }
      float* out = packed + ((group * oh + 2 * th) * ow + 2 * tw) * kLanes;
      for (int r = 0; r < 2; ++r) {
        _mm256_storeu_ps(out + r * ow * kLanes,
                         _mm256_add_ps(_mm256_add_ps(s[r][0], s[r][1]), s[r][2]));
        _mm256_storeu_ps(out + (r * ow + 1) * kLanes,
                         _mm256_sub_ps(_mm256_sub_ps(s[r][1], s[r][2]), s[r][3]));
      }
    }
  }
}

PURINE_AVX2 void output_grads_3x3(const float* packed, int64_t groups, int64_t oh, int64_t ow,
                                  int64_t tile_w, int64_t first, int64_t tiles, float* z,
                                  int64_t ld, int64_t step) {
  int64_t th = first / tile_w, tw = first % tile_w;
  for (int64_t t = 0; t < tiles; ++t, tw = tw + 1 == tile_w ? (++th, 0) : tw + 1) {
    for (int64_t group = 0; group < groups; ++group) {
      const float* dy = packed + ((group * oh + 2 * th) * ow + 2 * tw) * kLanes;
      __m256 c[2][4];  // A dy: 4 rows of the 2 columns
      for (int col = 0; col < 2; ++col) {
        const __m256 y0 = _mm256_loadu_ps(dy + col * kLanes),
                     y1 = _mm256_loadu_ps(dy + (ow + col) * kLanes);
        c[col][0] = y0;
        c[col][1] = _mm256_add_ps(y0, y1);
        c[col][2] = _mm256_sub_ps(y0, y1);
        c[col][3] = _mm256_sub_ps(_mm256_setzero_ps(), y1);
      }
      float* out = z + t * ld + group * kLanes;
      for (int r = 0; r < 4; ++r) {
        const __m256 y0 = c[0][r], y1 = c[1][r];
        _mm256_storeu_ps(out + (r * 4 + 0) * step, y0);
        _mm256_storeu_ps(out + (r * 4 + 1) * step, _mm256_add_ps(y0, y1));
        _mm256_storeu_ps(out + (r * 4 + 2) * step, _mm256_sub_ps(y0, y1));
        _mm256_storeu_ps(out + (r * 4 + 3) * step, _mm256_sub_ps(_mm256_setzero_ps(), y1));
      }
    }
  }
}

PURINE_AVX2 void kernels_3x3(const float* w, const TapStrides& taps, int64_t in, int64_t out,
                             int64_t in8, int64_t out8, float* u) {
  const __m256 half = _mm256_set1_ps(0.5f);
  for (int64_t i = 0; i < in8; ++i) {
    for (int64_t o0 = 0; o0 < out8; o0 += kLanes) {
      __m256 g[3][3];
      for (int a = 0; a < 3; ++a)
        for (int b = 0; b < 3; ++b) {
          alignas(32) float lanes[kLanes];
          for (int64_t l = 0; l < kLanes; ++l)
            lanes[l] =
                i < in && o0 + l < out
                    ? w[taps.at + (o0 + l) * taps.so + i * taps.si + a * taps.sa + b * taps.sb]
                    : 0.0f;
          g[a][b] = _mm256_load_ps(lanes);
        }
      __m256 t[4][3];
      for (int b = 0; b < 3; ++b) {
        t[0][b] = g[0][b];
        t[1][b] = _mm256_mul_ps(half, _mm256_add_ps(_mm256_add_ps(g[0][b], g[1][b]), g[2][b]));
        t[2][b] = _mm256_mul_ps(half, _mm256_add_ps(_mm256_sub_ps(g[0][b], g[1][b]), g[2][b]));
        t[3][b] = g[2][b];
      }
      for (int r = 0; r < 4; ++r) {
        const __m256 row[4] = {
            t[r][0], _mm256_mul_ps(half, _mm256_add_ps(_mm256_add_ps(t[r][0], t[r][1]), t[r][2])),
            _mm256_mul_ps(half, _mm256_add_ps(_mm256_sub_ps(t[r][0], t[r][1]), t[r][2])), t[r][2]};
        for (int s = 0; s < 4; ++s)
          _mm256_storeu_ps(u + ((r * 4 + s) * in8 + i) * out8 + o0, row[s]);
      }
    }
  }
}

PURINE_AVX2 void kernel_gradient_3x3(const float* du, int64_t in, int64_t out, int64_t in8,
                                     int64_t out8, float* dw) {
  const __m256 half = _mm256_set1_ps(0.5f);
  for (int64_t i = 0; i < in; ++i) {
    for (int64_t o0 = 0; o0 < out; o0 += kLanes) {
      __m256 d[4][4];
      for (int xi = 0; xi < 16; ++xi)
        d[xi / 4][xi % 4] = _mm256_loadu_ps(du + (xi * in8 + i) * out8 + o0);
      __m256 t[3][4];  // G' du
      for (int s = 0; s < 4; ++s) {
        const __m256 mid = _mm256_mul_ps(half, _mm256_add_ps(d[1][s], d[2][s]));
        t[0][s] = _mm256_add_ps(d[0][s], mid);
        t[1][s] = _mm256_mul_ps(half, _mm256_sub_ps(d[1][s], d[2][s]));
        t[2][s] = _mm256_add_ps(mid, d[3][s]);
      }
      alignas(32) float taps[9][kLanes];
      for (int a = 0; a < 3; ++a) {
        const __m256 mid = _mm256_mul_ps(half, _mm256_add_ps(t[a][1], t[a][2]));
        _mm256_store_ps(taps[a * 3 + 0], _mm256_add_ps(t[a][0], mid));
        _mm256_store_ps(taps[a * 3 + 1], _mm256_mul_ps(half, _mm256_sub_ps(t[a][1], t[a][2])));
        _mm256_store_ps(taps[a * 3 + 2], _mm256_add_ps(mid, t[a][3]));
      }
      for (int64_t l = 0; l < std::min(kLanes, out - o0); ++l)
        for (int tap = 0; tap < 9; ++tap) dw[((o0 + l) * in + i) * 9 + tap] = taps[tap][l];
    }
  }
}

}  // namespace

const Transforms& transforms_3x3() {
  static const Transforms transforms{
      3, 4, inputs_3x3, outputs_3x3, output_grads_3x3, kernels_3x3, kernel_gradient_3x3};
  return transforms;
}

}  // namespace purine::winograd
