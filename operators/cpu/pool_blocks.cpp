#include "operators/cpu/pool_blocks.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "operators/cpu/isa_loops.hpp"
#include "operators/cpu/masked.hpp"

namespace purine {

namespace {

// Lanes of at most this many channels (the blocks are 8 or 16).
constexpr int64_t kMaxLanes = 16;

// One (image, channel block): its input plane of pixels of `lanes` floats, and its output plane.
struct BlockPlanes {
  int64_t lanes, in_plane, out_plane;  // b, H W b, Ho Wo b (floats)
};

// Any window: max keeps a later value only when greater, avg sums in row-major order.
inline __attribute__((always_inline)) void pool_unit(const PoolGeometry& g, const BlockPlanes& p,
                                                     const float* in, float* out) {
  const float inv_area = 1.0f / static_cast<float>(g.kernel_h * g.kernel_w);
  for (int64_t oh = 0; oh < g.ho; ++oh) {
    for (int64_t ow = 0; ow < g.wo; ++ow) {
      const PoolWindow win = pool_window(g, oh, ow);
      float acc[kMaxLanes];
      const float* first = in + (win.h0 * g.w + win.w0) * p.lanes;
      for (int64_t l = 0; l < p.lanes; ++l) acc[l] = g.max ? first[l] : 0.0f;
      for (int64_t h = win.h0; h < win.h1; ++h) {
        for (int64_t w = win.w0; w < win.w1; ++w) {
          const float* v = in + (h * g.w + w) * p.lanes;
          for (int64_t l = 0; l < p.lanes; ++l)
            acc[l] = g.max ? (v[l] > acc[l] ? v[l] : acc[l]) : acc[l] + v[l];
        }
      }
      float* o = out + (oh * g.wo + ow) * p.lanes;
      for (int64_t l = 0; l < p.lanes; ++l) o[l] = g.max ? acc[l] : acc[l] * inv_area;
    }
  }
}

// Its gradient: each window adds dy into zeros, at each lane's first maximum (max) or spread
// over the window (avg), windows in row-major order.
inline __attribute__((always_inline)) void pool_grad_unit(const PoolGeometry& g,
                                                          const BlockPlanes& p, const float* in,
                                                          const float* dy, float* dx) {
  const float inv_area = 1.0f / static_cast<float>(g.kernel_h * g.kernel_w);
  std::fill(dx, dx + p.in_plane, 0.0f);
  for (int64_t oh = 0; oh < g.ho; ++oh) {
    for (int64_t ow = 0; ow < g.wo; ++ow) {
      const PoolWindow win = pool_window(g, oh, ow);
      const float* v = dy + (oh * g.wo + ow) * p.lanes;
      if (!g.max) {
        for (int64_t h = win.h0; h < win.h1; ++h)
          for (int64_t w = win.w0; w < win.w1; ++w) {
            float* d = dx + (h * g.w + w) * p.lanes;
            for (int64_t l = 0; l < p.lanes; ++l) d[l] += v[l] * inv_area;
          }
        continue;
      }
      float best[kMaxLanes];
      int64_t at[kMaxLanes];
      const int64_t first = win.h0 * g.w + win.w0;
      for (int64_t l = 0; l < p.lanes; ++l) {
        best[l] = in[first * p.lanes + l];
        at[l] = first;
      }
      for (int64_t h = win.h0; h < win.h1; ++h)
        for (int64_t w = win.w0; w < win.w1; ++w) {
          const float* x = in + (h * g.w + w) * p.lanes;
          for (int64_t l = 0; l < p.lanes; ++l) {
            const bool more = x[l] > best[l];
            best[l] = more ? x[l] : best[l];
            at[l] = more ? h * g.w + w : at[l];
          }
        }
      for (int64_t l = 0; l < p.lanes; ++l) dx[at[l] * p.lanes + l] += v[l];
    }
  }
}

// Max 2x2 stride 2 (disjoint windows) over B lanes, the forward, as pool.cpp's pool_plane.
template <int B>
inline __attribute__((always_inline)) void max_2x2(const PoolGeometry& g, const float* in,
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

}  // namespace

void pool_blocks(const PoolGeometry& g, int64_t n, int64_t c, int64_t block, const float* x,
                 float* y) {
  const BlockPlanes p{block, g.h * g.w * block, g.ho * g.wo * block};
  const int64_t units = n * (c / block);
  const bool max_2x2_16 = is_max_2x2(g) && block == 16, max_2x2_8 = is_max_2x2(g) && block == 8;
  parallel_for_isa(
      units,
      units * p.in_plane > kParallelMinArithmetic, [&](int64_t u) __attribute__((always_inline)) {
        const float* in = x + u * p.in_plane;
        float* out = y + u * p.out_plane;
        if (max_2x2_16) {
          max_2x2<16>(g, in, out);
        } else if (max_2x2_8) {
          max_2x2<8>(g, in, out);
        } else {
          pool_unit(g, p, in, out);
        }
      });
}

void pool_grad_blocks(const PoolGeometry& g, int64_t n, int64_t c, int64_t block, const float* x,
                      const float* dy, float* dx) {
  const BlockPlanes p{block, g.h * g.w * block, g.ho * g.wo * block};
  const int64_t units = n * (c / block);
  const bool max_2x2_16 = is_max_2x2(g) && block == 16, max_2x2_8 = is_max_2x2(g) && block == 8;
  parallel_for_isa(
      units,
      units * p.in_plane > kParallelMinArithmetic, [&](int64_t u) __attribute__((always_inline)) {
        const float* in = x + u * p.in_plane;
        const float* grad = dy + u * p.out_plane;
        float* out = dx + u * p.in_plane;
        if (max_2x2_16) {
          max_2x2_grad<16>(g, in, grad, out);
        } else if (max_2x2_8) {
          max_2x2_grad<8>(g, in, grad, out);
        } else {
          pool_grad_unit(g, p, in, grad, out);
        }
      });
}

}  // namespace purine
