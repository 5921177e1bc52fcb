// The steps of Winograd's convolutions (winograd_steps.hpp) and F(2x2, 3x3)'s transforms (4x4
// input tiles: B' = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; 1/2 1/2 1/2;
// 1/2 -1/2 1/2; 0 0 1], A' = [1 1 1 0; 0 1 -1 -1]), each compiled for AVX2 and FMA (the build
// targets plain x86-64; conv_winograd.cpp calls them only where the CPU has both). The 6x16
// register tiles keep their accumulators in registers only with their loops unrolled: GCC
// otherwise stored them to the stack at every step (32 against 70 GFLOP/s on one core,
// docs/MEASUREMENTS.md).
#include "operators/cpu/winograd_steps.hpp"

#include <immintrin.h>

#include <algorithm>

#include "operators/cpu/winograd_tiles.hpp"

namespace purine::winograd {

namespace {

// The address of channel c's pixel p in image n of a [N, channels, pixels] tensor in `block`s.
inline int64_t element(int64_t n, int64_t channels, int64_t pixels, int block, int64_t c,
                       int64_t p) {
  if (block == 0) return (n * channels + c) * pixels + p;
  return ((n * channels / block + c / block) * pixels + p) * block + c % block;
}

// 8x8 transpose of rows r[0..8) in place.
PURINE_WINOGRAD_AVX2_INLINE void transpose8(__m256* r) {
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
PURINE_WINOGRAD_AVX2_INLINE __m256 finish(__m256 v, const float* bias, __m256 b) {
  return bias ? _mm256_max_ps(_mm256_add_ps(v, b), _mm256_setzero_ps()) : v;
}

// m[r][j] = (with kAdd: m[r][j] +) the sum over k < depth, in order, of a[r][k] b[k][j] for R
// rows and V vectors of 8 columns; a[r][k] is at a + r lda + k, with kAdd at a + k lda + r.
template <int R, int V, bool kAdd>
PURINE_WINOGRAD_AVX2 void gemm_tile(const float* a, int64_t lda, const float* b, int64_t ldb,
                                    int64_t depth, float* m, int64_t ldm) {
  __m256 acc[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < V; ++j)
      acc[r][j] = kAdd ? _mm256_loadu_ps(m + r * ldm + j * kLanes) : _mm256_setzero_ps();
  for (int64_t k = 0; k < depth; ++k) {
    __m256 col[V];
#pragma GCC unroll 2
    for (int j = 0; j < V; ++j) col[j] = _mm256_loadu_ps(b + k * ldb + j * kLanes);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 row = _mm256_broadcast_ss(kAdd ? a + k * lda + r : a + r * lda + k);
#pragma GCC unroll 2
      for (int j = 0; j < V; ++j) acc[r][j] = _mm256_fmadd_ps(row, col[j], acc[r][j]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < V; ++j) _mm256_storeu_ps(m + r * ldm + j * kLanes, acc[r][j]);
}

// gemm_tile<rows, vectors, kAdd> for 1 <= rows <= kRows and 1 <= vectors <= kVectors.
template <bool kAdd>
GemmTile gemm_tile_for(int rows, int vectors) {
  static const GemmTile tiles[kRows][kVectors] = {{gemm_tile<1, 1, kAdd>, gemm_tile<1, 2, kAdd>},
                                                  {gemm_tile<2, 1, kAdd>, gemm_tile<2, 2, kAdd>},
                                                  {gemm_tile<3, 1, kAdd>, gemm_tile<3, 2, kAdd>},
                                                  {gemm_tile<4, 1, kAdd>, gemm_tile<4, 2, kAdd>},
                                                  {gemm_tile<5, 1, kAdd>, gemm_tile<5, 2, kAdd>},
                                                  {gemm_tile<6, 1, kAdd>, gemm_tile<6, 2, kAdd>}};
  return tiles[rows - 1][vectors - 1];
}

}  // namespace

PURINE_WINOGRAD_AVX2 void pack_image(const float* from, int block, int64_t n, int64_t channels,
                                     int64_t h, int64_t w, int64_t pad_h, int64_t pad_w, int64_t hp,
                                     int64_t wp, float* packed) {
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

PURINE_WINOGRAD_AVX2 void unpack_image(const float* packed, int64_t hp, int64_t wp,
                                       int64_t channels, int64_t h, int64_t w, const float* bias,
                                       int block, int64_t n, float* to) {
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

GemmTile gemm_tile_of(int rows, int vectors) { return gemm_tile_for<false>(rows, vectors); }

GemmTile gemm_add_tile_of(int rows, int vectors) { return gemm_tile_for<true>(rows, vectors); }

namespace {

// F(2x2, 3x3)'s 1-D transforms (winograd_tiles.hpp).
struct F2x2By3x3 {
  static constexpr int m = 2, r = 3, alpha = 4;

  // y = B' x.
  static PURINE_WINOGRAD_AVX2_INLINE void input(const __m256* x, __m256* y) {
    y[0] = _mm256_sub_ps(x[0], x[2]);
    y[1] = _mm256_add_ps(x[1], x[2]);
    y[2] = _mm256_sub_ps(x[2], x[1]);
    y[3] = _mm256_sub_ps(x[1], x[3]);
  }
  // y = A' m (2 of 4).
  static PURINE_WINOGRAD_AVX2_INLINE void output(const __m256* m, __m256* y) {
    y[0] = _mm256_add_ps(_mm256_add_ps(m[0], m[1]), m[2]);
    y[1] = _mm256_sub_ps(_mm256_sub_ps(m[1], m[2]), m[3]);
  }
  // z = A y (4 of 2).
  static PURINE_WINOGRAD_AVX2_INLINE void output_grad(const __m256* y, __m256* z) {
    z[0] = y[0];
    z[1] = _mm256_add_ps(y[0], y[1]);
    z[2] = _mm256_sub_ps(y[0], y[1]);
    z[3] = _mm256_sub_ps(_mm256_setzero_ps(), y[1]);
  }
  // u = G g (4 of 3).
  static PURINE_WINOGRAD_AVX2_INLINE void kernel(const __m256* g, __m256* u) {
    const __m256 half = _mm256_set1_ps(0.5f);
    u[0] = g[0];
    u[1] = _mm256_mul_ps(half, _mm256_add_ps(_mm256_add_ps(g[0], g[1]), g[2]));
    u[2] = _mm256_mul_ps(half, _mm256_add_ps(_mm256_sub_ps(g[0], g[1]), g[2]));
    u[3] = g[2];
  }
  // g = G' d (3 of 4).
  static PURINE_WINOGRAD_AVX2_INLINE void kernel_grad(const __m256* d, __m256* g) {
    const __m256 half = _mm256_set1_ps(0.5f);
    const __m256 mid = _mm256_mul_ps(half, _mm256_add_ps(d[1], d[2]));
    g[0] = _mm256_add_ps(d[0], mid);
    g[1] = _mm256_mul_ps(half, _mm256_sub_ps(d[1], d[2]));
    g[2] = _mm256_add_ps(mid, d[3]);
  }
};

}  // namespace

const Transforms& transforms_2x2_3x3() { return transforms_of<F2x2By3x3>(); }

}  // namespace purine::winograd
