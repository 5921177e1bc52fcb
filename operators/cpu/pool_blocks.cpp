#include "operators/cpu/pool_blocks.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "operators/cpu/isa_loops.hpp"
#include "operators/cpu/masked.hpp"
#include "operators/cpu/pool_lanes.hpp"

namespace purine {

namespace {

// Max 2x2 stride 2 (disjoint windows) over B lanes, the forward, as pool.cpp's pool_plane.
template <int B>
inline __attribute__((always_inline)) void max_2x2_unit(const PoolGeometry& g, const float* in,
                                                        float* out) {
  for (int64_t oh = 0; oh < g.ho; ++oh) {
    const float* r0 = in + 2 * oh * g.w * B;
    const float* r1 = r0 + g.w * B;
    float* o = out + oh * g.wo * B;
    for (int64_t ow = 0; ow < g.wo; ++ow) {
      const float* a = r0 + 2 * ow * B;
      const float* c = r1 + 2 * ow * B;
      for (int l = 0; l < B; ++l) {
        float m = a[l];
        m = a[B + l] > m ? a[B + l] : m;
        m = c[l] > m ? c[l] : m;
        o[ow * B + l] = c[B + l] > m ? c[B + l] : m;
      }
    }
  }
}

// Its gradient: each window's first maximum takes dy, the other three +0, as pool.cpp's
// pool_grad_plane; the last row and column, when no window covers them, +0.
template <int B>
inline __attribute__((always_inline)) void max_2x2_grad(const PoolGeometry& g,
                                                        const float* __restrict in,
                                                        const float* __restrict dy,
                                                        float* __restrict dx) {
  for (int64_t oh = 0; oh < g.ho; ++oh) {
    for (int64_t ow = 0; ow < g.wo; ++ow) {
      const int64_t at = (2 * oh * g.w + 2 * ow) * B;  // the window's top left pixel
      const float* __restrict a = in + at;
      const float* __restrict c = a + g.w * B;
      const float* __restrict v = dy + (oh * g.wo + ow) * B;
      float* __restrict da = dx + at;
      float* __restrict dc = da + g.w * B;
      // Bit masks, not branches (as pool.cpp: on random data branches mispredict).
      for (int l = 0; l < B; ++l) {
        const uint32_t more_b = a[B + l] > a[l];
        const float m_ab = more_b ? a[B + l] : a[l];
        const uint32_t more_c = c[l] > m_ab;
        const uint32_t more_d = c[B + l] > (more_c ? c[l] : m_ab);
        da[l] = masked(v[l], (more_b | more_c | more_d) ^ 1u);
        da[B + l] = masked(v[l], more_b & ((more_c | more_d) ^ 1u));
        dc[l] = masked(v[l], more_c & (more_d ^ 1u));
        dc[B + l] = masked(v[l], more_d);
      }
    }
    float* d0 = dx + 2 * oh * g.w * B;
    float* d1 = d0 + g.w * B;
    std::fill(d0 + 2 * g.wo * B, d0 + g.w * B, 0.0f);
    std::fill(d1 + 2 * g.wo * B, d1 + g.w * B, 0.0f);
  }
  std::fill(dx + 2 * g.ho * g.w * B, dx + g.h * g.w * B, 0.0f);
}

// Calls fn(in, out) with the offsets of each (image, channel block) unit's input and output
// planes (H W b and Ho Wo b floats), units in parallel; fn marked always_inline, as
// parallel_for_isa asks of its own.
template <class Fn>
void for_each_unit(const PoolGeometry& g, int64_t n, int64_t c, int64_t block, const Fn& fn) {
  const int64_t in_plane = g.h * g.w * block, out_plane = g.ho * g.wo * block;
  const int64_t units = n * (c / block);
  parallel_for_isa(
      units,
      units * in_plane > kParallelMinArithmetic, [&](int64_t u) __attribute__((always_inline)) {
        fn(u * in_plane, u * out_plane);
      });
}

}  // namespace

void pool_blocks(const PoolGeometry& g, int64_t n, int64_t c, int64_t block, const float* x,
                 bool x_blocked, float* y, bool y_blocked) {
  if (!is_max_2x2(g) || !x_blocked || !y_blocked)
    return pool_lanes_blocked(g, n, c, block, x, x_blocked, y, y_blocked);
  for_each_unit(
      g, n, c, block, [&](int64_t in, int64_t out) __attribute__((always_inline)) {
        block == 16 ? max_2x2_unit<16>(g, x + in, y + out) : max_2x2_unit<8>(g, x + in, y + out);
      });
}

void pool_grad_blocks(const PoolGeometry& g, int64_t n, int64_t c, int64_t block, const float* x,
                      bool x_blocked, const float* dy, bool dy_blocked, float* dx,
                      bool dx_blocked) {
  if (!is_max_2x2(g) || !x_blocked || !dy_blocked || !dx_blocked)
    return pool_grad_lanes_blocked(g, n, c, block, x, x_blocked, dy, dy_blocked, dx, dx_blocked);
  for_each_unit(
      g, n, c, block, [&](int64_t in, int64_t out) __attribute__((always_inline)) {
        block == 16 ? max_2x2_grad<16>(g, x + in, dy + out, dx + in)
                    : max_2x2_grad<8>(g, x + in, dy + out, dx + in);
      });
}

}  // namespace purine
