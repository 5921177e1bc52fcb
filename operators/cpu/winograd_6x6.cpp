// The transforms of Winograd's convolutions on 6x6 input tiles (winograd_steps.hpp), F(2x2, 5x5)
// and F(4x4, 3x3): 36 products for 4 output pixels where the direct convolution multiplies 100
// times, and for 16 where it multiplies 144. Both interpolate at the points 0, 1, -1, 2, -2 and
// infinity, so they share the input transform B' and G's and A''s scales:
//   B' = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
//   F(2x2, 5x5): G = [1/4 0 0 0 0; -1/6 x5; -1/6 1/6 -1/6 1/6 -1/6; 1 2 4 8 16 / 24;
//                     1 -2 4 -8 16 / 24; 0 0 0 0 1],  A' = [1 1 1 1 1 0; 0 1 -1 2 -2 1]
//   F(4x4, 3x3): G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6;
//                     0 0 1],  A' = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
// Their sums round further from the exact ones than F(2x2, 3x3)'s: the transforms multiply by up
// to 5 (B') and 8 (A') and cancel.
#include "operators/cpu/winograd_tiles.hpp"

namespace purine::winograd {

namespace {

PURINE_WINOGRAD_AVX2_INLINE __m256 times(float c, __m256 x) {
  return _mm256_mul_ps(_mm256_set1_ps(c), x);
}

// The 1-D transforms (winograd_tiles.hpp) that depend on the points alone.
struct SixPoints {
  static constexpr int alpha = 6;

  // y = B' x.
  static PURINE_WINOGRAD_AVX2_INLINE void input(const __m256* x, __m256* y) {
    const __m256 four = _mm256_set1_ps(4.0f), two = _mm256_set1_ps(2.0f);
    y[0] = _mm256_fmadd_ps(four, x[0], _mm256_fnmadd_ps(_mm256_set1_ps(5.0f), x[2], x[4]));
    y[1] = _mm256_fnmadd_ps(four, _mm256_add_ps(x[1], x[2]), _mm256_add_ps(x[3], x[4]));
    y[2] = _mm256_fmadd_ps(four, _mm256_sub_ps(x[1], x[2]), _mm256_sub_ps(x[4], x[3]));
    y[3] = _mm256_fmadd_ps(two, _mm256_sub_ps(x[3], x[1]), _mm256_sub_ps(x[4], x[2]));
    y[4] = _mm256_fnmadd_ps(two, _mm256_sub_ps(x[3], x[1]), _mm256_sub_ps(x[4], x[2]));
    y[5] = _mm256_fmadd_ps(four, x[1], _mm256_fnmadd_ps(_mm256_set1_ps(5.0f), x[3], x[5]));
  }

  // The rows of g = G' d that every kernel size shares (G's first three columns but for the
  // point at infinity's row depend on the points alone): g[0], g[1] and g[2] but for d[5]'s
  // term; returns the sums of d they take.
  struct GradSums {
    __m256 sum12, diff21, sum34, diff34;
  };
  static PURINE_WINOGRAD_AVX2_INLINE GradSums kernel_grad_head(const __m256* d, __m256* g) {
    const GradSums s{_mm256_add_ps(d[1], d[2]), _mm256_sub_ps(d[2], d[1]),
                     _mm256_add_ps(d[3], d[4]), _mm256_sub_ps(d[3], d[4])};
    const __m256 sixth = _mm256_set1_ps(1.0f / 6);
    g[0] = _mm256_add_ps(_mm256_fnmadd_ps(sixth, s.sum12, times(0.25f, d[0])),
                         times(1.0f / 24, s.sum34));
    g[1] = _mm256_fmadd_ps(sixth, s.diff21, times(1.0f / 12, s.diff34));
    g[2] = _mm256_mul_ps(sixth, _mm256_sub_ps(s.sum34, s.sum12));
    return s;
  }
};

struct F2x2By5x5 : SixPoints {
  static constexpr int m = 2, r = 5;

  // y = A' m (2 of 6).
  static PURINE_WINOGRAD_AVX2_INLINE void output(const __m256* m, __m256* y) {
    y[0] = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(m[0], m[1]), _mm256_add_ps(m[2], m[3])), m[4]);
    y[1] = _mm256_add_ps(
        _mm256_fmadd_ps(_mm256_set1_ps(2.0f), _mm256_sub_ps(m[3], m[4]), _mm256_sub_ps(m[1], m[2])),
        m[5]);
  }

  // z = A y (6 of 2).
  static PURINE_WINOGRAD_AVX2_INLINE void output_grad(const __m256* y, __m256* z) {
    const __m256 two = _mm256_set1_ps(2.0f);
    z[0] = y[0];
    z[1] = _mm256_add_ps(y[0], y[1]);
    z[2] = _mm256_sub_ps(y[0], y[1]);
    z[3] = _mm256_fmadd_ps(two, y[1], y[0]);
    z[4] = _mm256_fnmadd_ps(two, y[1], y[0]);
    z[5] = y[1];
  }

  // u = G g (6 of 5).
  static PURINE_WINOGRAD_AVX2_INLINE void kernel(const __m256* g, __m256* u) {
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
  static PURINE_WINOGRAD_AVX2_INLINE void kernel_grad(const __m256* d, __m256* g) {
    const GradSums s = kernel_grad_head(d, g);
    const __m256 sixth = _mm256_set1_ps(1.0f / 6);
    g[3] = _mm256_fmadd_ps(sixth, s.diff21, times(1.0f / 3, s.diff34));
    g[4] = _mm256_add_ps(
        _mm256_fmadd_ps(_mm256_set1_ps(2.0f / 3), s.sum34, times(-1.0f / 6, s.sum12)), d[5]);
  }
};

struct F4x4By3x3 : SixPoints {
  static constexpr int m = 4, r = 3;

  // y = A' m (4 of 6).
  static PURINE_WINOGRAD_AVX2_INLINE void output(const __m256* m, __m256* y) {
    const __m256 sum12 = _mm256_add_ps(m[1], m[2]), diff12 = _mm256_sub_ps(m[1], m[2]),
                 sum34 = _mm256_add_ps(m[3], m[4]), diff34 = _mm256_sub_ps(m[3], m[4]);
    y[0] = _mm256_add_ps(_mm256_add_ps(m[0], sum12), sum34);
    y[1] = _mm256_fmadd_ps(_mm256_set1_ps(2.0f), diff34, diff12);
    y[2] = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), sum34, sum12);
    y[3] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.0f), diff34, diff12), m[5]);
  }

  // z = A y (6 of 4).
  static PURINE_WINOGRAD_AVX2_INLINE void output_grad(const __m256* y, __m256* z) {
    const __m256 even = _mm256_add_ps(y[0], y[2]), odd = _mm256_add_ps(y[1], y[3]);
    const __m256 even4 = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), y[2], y[0]),
                 odd4 = _mm256_fmadd_ps(_mm256_set1_ps(8.0f), y[3], _mm256_add_ps(y[1], y[1]));
    z[0] = y[0];
    z[1] = _mm256_add_ps(even, odd);
    z[2] = _mm256_sub_ps(even, odd);
    z[3] = _mm256_add_ps(even4, odd4);
    z[4] = _mm256_sub_ps(even4, odd4);
    z[5] = y[3];
  }

  // u = G g (6 of 3).
  static PURINE_WINOGRAD_AVX2_INLINE void kernel(const __m256* g, __m256* u) {
    const __m256 even = _mm256_add_ps(g[0], g[2]),
                 even4 = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), g[2], g[0]),
                 odd2 = _mm256_add_ps(g[1], g[1]);
    u[0] = times(0.25f, g[0]);
    u[1] = times(-1.0f / 6, _mm256_add_ps(even, g[1]));
    u[2] = times(-1.0f / 6, _mm256_sub_ps(even, g[1]));
    u[3] = times(1.0f / 24, _mm256_add_ps(even4, odd2));
    u[4] = times(1.0f / 24, _mm256_sub_ps(even4, odd2));
    u[5] = g[2];
  }

  // g = G' d (3 of 6).
  static PURINE_WINOGRAD_AVX2_INLINE void kernel_grad(const __m256* d, __m256* g) {
    kernel_grad_head(d, g);
    g[2] = _mm256_add_ps(g[2], d[5]);
  }
};

}  // namespace

const Transforms& transforms_2x2_5x5() { return transforms_of<F2x2By5x5>(); }
const Transforms& transforms_4x4_3x3() { return transforms_of<F4x4By3x3>(); }

}  // namespace purine::winograd
