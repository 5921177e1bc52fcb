// The transforms of Winograd's F(2x2, 5x5) (winograd_steps.hpp): 6x6 input tiles, the points
// 0, 1, -1, 2, -2 and infinity (those of the common F(4x4, 3x3), whose input transform it shares),
// 36 products for 4 output pixels where the direct convolution multiplies 100 times. In 1-D:
//   B' = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
//   G  = [1/4 0 0 0 0; -1/6 x5; -1/6 1/6 -1/6 1/6 -1/6; 1 2 4 8 16 / 24; 1 -2 4 -8 16 / 24;
//         0 0 0 0 1]
//   A' = [1 1 1 1 1 0; 0 1 -1 2 -2 1]
#include "operators/cpu/winograd_tiles.hpp"

namespace purine::winograd {

namespace {

// The 1-D transforms (winograd_tiles.hpp).
struct F2x2By5x5 {
  static constexpr int r = 5, alpha = 6;

  static PURINE_WINOGRAD_AVX2_INLINE __m256 times(float c, __m256 x) {
    return _mm256_mul_ps(_mm256_set1_ps(c), x);
  }

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

  // y = A' m (2 of 6).
  static PURINE_WINOGRAD_AVX2_INLINE void output(const __m256* m, __m256* y) {
    y[0] = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(m[0], m[1]), _mm256_add_ps(m[2], m[3])), m[4]);
    y[1] = _mm256_add_ps(
        _mm256_fmadd_ps(_mm256_set1_ps(2.0f), _mm256_sub_ps(m[3], m[4]), _mm256_sub_ps(m[1], m[2])),
        m[5]);
  }

  // z = A y (6 of 2).
  static PURINE_WINOGRAD_AVX2_INLINE void output_grad(__m256 y0, __m256 y1, __m256* z) {
    const __m256 two = _mm256_set1_ps(2.0f);
    z[0] = y0;
    z[1] = _mm256_add_ps(y0, y1);
    z[2] = _mm256_sub_ps(y0, y1);
    z[3] = _mm256_fmadd_ps(two, y1, y0);
    z[4] = _mm256_fnmadd_ps(two, y1, y0);
    z[5] = y1;
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
    const __m256 sum12 = _mm256_add_ps(d[1], d[2]), diff21 = _mm256_sub_ps(d[2], d[1]),
                 sum34 = _mm256_add_ps(d[3], d[4]), diff34 = _mm256_sub_ps(d[3], d[4]);
    const __m256 sixth = _mm256_set1_ps(1.0f / 6);
    g[0] =
        _mm256_add_ps(_mm256_fnmadd_ps(sixth, sum12, times(0.25f, d[0])), times(1.0f / 24, sum34));
    g[1] = _mm256_fmadd_ps(sixth, diff21, times(1.0f / 12, diff34));
    g[2] = _mm256_mul_ps(sixth, _mm256_sub_ps(sum34, sum12));
    g[3] = _mm256_fmadd_ps(sixth, diff21, times(1.0f / 3, diff34));
    g[4] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(2.0f / 3), sum34, times(-1.0f / 6, sum12)),
                         d[5]);
  }
};

}  // namespace

const Transforms& transforms_5x5() { return transforms_of<F2x2By5x5>(); }

}  // namespace purine::winograd
