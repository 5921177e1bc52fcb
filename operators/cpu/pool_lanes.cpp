#include "operators/cpu/pool_lanes.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "operators/cpu/lane_tiles.hpp"
#include "operators/cpu/thread_workspace.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/cpu/vector_isa.hpp"

namespace purine {

namespace {

constexpr int64_t kMaxLanePlane = 4096;

// Planes per task: whole blocks of every width, enough that a task's set-up (its tiles) is small
// beside its work on planes of a pixel or a few.
constexpr int64_t kPlanesPerTask = 256;

// The input offsets of every output's window, output by output, each in row-major order:
// window o is offsets[begin[o]] .. offsets[begin[o + 1] - 1].
struct Windows {
  std::vector<int32_t> begin;
  std::vector<int32_t> offsets;
};

Windows windows_of(const PoolGeometry& g) {
  Windows list;
  list.begin.reserve(g.ho * g.wo + 1);
  for (int64_t oh = 0; oh < g.ho; ++oh)
    for (int64_t ow = 0; ow < g.wo; ++ow) {
      list.begin.push_back(static_cast<int32_t>(list.offsets.size()));
      const PoolWindow win = pool_window(g, oh, ow);
      for (int64_t h = win.h0; h < win.h1; ++h)
        for (int64_t w = win.w0; w < win.w1; ++w)
          list.offsets.push_back(static_cast<int32_t>(h * g.w + w));
    }
  list.begin.push_back(static_cast<int32_t>(list.offsets.size()));
  return list;
}

// Everything in Blocks is inlined into the entry points at the end, each compiled for its ISA
// (lane_tiles.hpp). pool_lanes.cpp builds with -ffp-contract=off: avg's gradient scales and then
// adds, and a fused multiply-add would round once where the baseline rounds twice.

// Pooling in blocks of L planes, one vector of L floats per pixel.
template <int L>
struct Blocks : LaneTiles<L> {
  using Lanes = typename LaneTypes<L>::Lanes;
  using Offsets = typename LaneTypes<L>::Offsets;

  // tile[q][l] = x[l * plane + q] for the first `lanes` planes (the other lanes keep whatever
  // they held: computed on, never stored), and the inverse.
  static PURINE_LANES_INLINE void to_tile(const float* x, int64_t plane, int64_t lanes,
                                          Lanes* tile) {
    LaneTiles<L>::to_rows(x, plane, lanes, reinterpret_cast<float*>(tile), L);
  }
  static PURINE_LANES_INLINE void from_tile(const Lanes* tile, int64_t plane, int64_t lanes,
                                            float* y) {
    LaneTiles<L>::from_rows(reinterpret_cast<const float*>(tile), L, plane, lanes, y);
  }

  // The piece at `offset` of the calling thread's workspace, as a tile (64-byte aligned, as
  // vectors of 16 floats need; a std::vector of them is not).
  static PURINE_LANES_INLINE Lanes* tile_at(char* workspace, size_t offset) {
    return reinterpret_cast<Lanes*>(workspace + offset);
  }

  // Every output of a tile pooled: out[o t] from in[q s] over the pixels q of o's window (s, t:
  // the tiles' strides, in vectors per pixel: more than 1 for channel blocks wider than L).
  template <class V>
  static PURINE_LANES_INLINE void pool_tile(const PoolGeometry& g, const Windows& windows,
                                            const V* in, int64_t s, V* out, int64_t t) {
    const int32_t* begin = windows.begin.data();
    const int32_t* offsets = windows.offsets.data();
    const float inv_area = 1.0f / static_cast<float>(g.kernel_h * g.kernel_w);
    for (int64_t o = 0; o < g.ho * g.wo; ++o) {
      if (g.max) {  // the first maximum: a later value wins only when greater
        V m = in[offsets[begin[o]] * s];
        for (int32_t k = begin[o] + 1; k < begin[o + 1]; ++k) {
          const V v = in[offsets[k] * s];
          m = v > m ? v : m;
        }
        out[o * t] = m;
      } else {  // the kernel's area divides, padding included
        V sum = {};
        for (int32_t k = begin[o]; k < begin[o + 1]; ++k) sum += in[offsets[k] * s];
        out[o * t] = sum * inv_area;
      }
    }
  }

  // The gradient of a tile, added into sum (zeros or a sum so far), output by output as plane
  // by plane. Max adds each output's gradient to every element of its window, masked to +0 but
  // at the first maximum: adding +0 leaves every sum of floats started at +0 as it was, so the
  // bits are those of adding the gradient at the maximum alone. Strides as pool_tile's: s of in,
  // t of grad, r of sum.
  template <class V>
  static PURINE_LANES_INLINE void pool_grad_tile(const PoolGeometry& g, const Windows& windows,
                                                 const V* in, int64_t s, const V* grad, int64_t t,
                                                 V* sum, int64_t r) {
    const int32_t* begin = windows.begin.data();
    const int32_t* offsets = windows.offsets.data();
    const float inv_area = 1.0f / static_cast<float>(g.kernel_h * g.kernel_w);
    for (int64_t o = 0; o < g.ho * g.wo; ++o) {
      const V v = grad[o * t];
      if (g.max) {
        const int32_t at = offsets[begin[o]];
        V m = in[at * s];
        Offsets best = Offsets{} + at;
        for (int32_t k = begin[o] + 1; k < begin[o + 1]; ++k) {
          const V x = in[offsets[k] * s];
          const Offsets more = x > m;
          m = more ? x : m;
          best = more ? Offsets{} + offsets[k] : best;
        }
        for (int32_t k = begin[o]; k < begin[o + 1]; ++k)
          sum[offsets[k] * r] += best == offsets[k] ? v : V{};
      } else {
        const V share = v * inv_area;
        for (int32_t k = begin[o]; k < begin[o + 1]; ++k) sum[offsets[k] * r] += share;
      }
    }
  }

  // Planes [first, last) of x pooled into y, L at a time.
  static PURINE_LANES_INLINE void pool(const PoolGeometry& g, const Windows& windows,
                                       const float* x, int64_t first, int64_t last, float* y) {
    const int64_t in_plane = g.h * g.w, out_plane = g.ho * g.wo;
    WorkspaceLayout layout;
    const size_t in_at = layout.add(in_plane * sizeof(Lanes));
    const size_t out_at = layout.add(out_plane * sizeof(Lanes));
    char* workspace = thread_workspace(layout.bytes());
    Lanes* in = tile_at(workspace, in_at);
    Lanes* out = tile_at(workspace, out_at);
    for (int64_t p = first; p < last; p += L) {
      const int64_t lanes = std::min<int64_t>(L, last - p);
      to_tile(x + p * in_plane, in_plane, lanes, in);
      pool_tile(g, windows, in, 1, out, 1);
      from_tile(out, out_plane, lanes, y + p * out_plane);
    }
  }

  // The gradient of planes [first, last): dx from x and dy, L planes at a time, summed in a tile.
  static PURINE_LANES_INLINE void pool_grad(const PoolGeometry& g, const Windows& windows,
                                            const float* x, const float* dy, int64_t first,
                                            int64_t last, float* dx) {
    const int64_t in_plane = g.h * g.w, out_plane = g.ho * g.wo;
    WorkspaceLayout layout;  // in: x for max
    const size_t in_at = layout.add(in_plane * sizeof(Lanes));
    const size_t sum_at = layout.add(in_plane * sizeof(Lanes));
    const size_t grad_at = layout.add(out_plane * sizeof(Lanes));
    char* workspace = thread_workspace(layout.bytes());
    Lanes* in = tile_at(workspace, in_at);
    Lanes* sum = tile_at(workspace, sum_at);
    Lanes* grad = tile_at(workspace, grad_at);
    for (int64_t p = first; p < last; p += L) {
      const int64_t lanes = std::min<int64_t>(L, last - p);
      to_tile(dy + p * out_plane, out_plane, lanes, grad);
      std::fill(sum, sum + in_plane, Lanes{});
      if (g.max) to_tile(x + p * in_plane, in_plane, lanes, in);
      pool_grad_tile(g, windows, in, 1, grad, 1, sum, 1);
      from_tile(sum, in_plane, lanes, dx + p * in_plane);
    }
  }

  // One unit of n images of `block` channels each (image i, channels [b block, (b + 1) block))
  // where each tensor is in channel blocks (Tensor::channel_block) of `block`, a multiple of L,
  // or plain (`blocked` says which): a blocked tensor's unit is already a tile of block / L
  // vectors per pixel; a plain one's, `block` planes, is turned into tiles of L planes (and back)
  // in the workspace. Either way the unit starts at the same offset, u block H W.
  using Unaligned = typename LaneTypes<L>::UnalignedLanes;
  struct Tile {
    Unaligned* at;
    int64_t stride;
  };
  // Where group j (channels [j L, (j + 1) L)) of a unit at `data` is read or written as a tile:
  // in place when blocked, else `scratch` (for reading: filled from the planes first).
  static PURINE_LANES_INLINE Tile tile_of(const float* data, bool blocked, int64_t block,
                                          int64_t plane, int64_t j, Lanes* scratch, bool read) {
    if (blocked) return {reinterpret_cast<Unaligned*>(const_cast<float*>(data)) + j, block / L};
    if (read) to_tile(data + j * L * plane, plane, L, scratch);
    return {reinterpret_cast<Unaligned*>(scratch), 1};
  }
  static PURINE_LANES_INLINE void pool_unit(const PoolGeometry& g, const Windows& windows,
                                            int64_t block, const float* x, bool x_blocked, float* y,
                                            bool y_blocked) {
    const int64_t in_plane = g.h * g.w, out_plane = g.ho * g.wo;
    WorkspaceLayout layout;
    const size_t in_at = layout.add(x_blocked ? 0 : in_plane * sizeof(Lanes));
    const size_t out_at = layout.add(y_blocked ? 0 : out_plane * sizeof(Lanes));
    char* workspace = thread_workspace(layout.bytes());
    for (int64_t j = 0; j < block / L; ++j) {
      const Tile in = tile_of(x, x_blocked, block, in_plane, j, tile_at(workspace, in_at), true);
      const Tile out =
          tile_of(y, y_blocked, block, out_plane, j, tile_at(workspace, out_at), false);
      pool_tile(g, windows, in.at, in.stride, out.at, out.stride);
      if (!y_blocked) from_tile(tile_at(workspace, out_at), out_plane, L, y + j * L * out_plane);
    }
  }
  static PURINE_LANES_INLINE void pool_grad_unit(const PoolGeometry& g, const Windows& windows,
                                                 int64_t block, const float* x, bool x_blocked,
                                                 const float* dy, bool dy_blocked, float* dx,
                                                 bool dx_blocked) {
    const int64_t in_plane = g.h * g.w, out_plane = g.ho * g.wo;
    WorkspaceLayout layout;
    const size_t x_at = layout.add(x_blocked ? 0 : in_plane * sizeof(Lanes));
    const size_t dy_at = layout.add(dy_blocked ? 0 : out_plane * sizeof(Lanes));
    const size_t dx_at = layout.add(dx_blocked ? 0 : in_plane * sizeof(Lanes));
    char* workspace = thread_workspace(layout.bytes());
    if (dx_blocked) std::fill(dx, dx + in_plane * block, 0.0f);
    for (int64_t j = 0; j < block / L; ++j) {
      const Tile in = tile_of(x, x_blocked, block, in_plane, j, tile_at(workspace, x_at), g.max);
      const Tile grad =
          tile_of(dy, dy_blocked, block, out_plane, j, tile_at(workspace, dy_at), true);
      const Tile sum =
          tile_of(dx, dx_blocked, block, in_plane, j, tile_at(workspace, dx_at), false);
      if (!dx_blocked) std::fill(sum.at, sum.at + in_plane, Unaligned{});
      pool_grad_tile(g, windows, in.at, in.stride, grad.at, grad.stride, sum.at, sum.stride);
      if (!dx_blocked) from_tile(tile_at(workspace, dx_at), in_plane, L, dx + j * L * in_plane);
    }
  }
};

// The entry points, one per ISA (vector_isa.hpp).
__attribute__((target("avx512f"))) void pool_avx512(const PoolGeometry& g, const Windows& w,
                                                    const float* x, int64_t first, int64_t last,
                                                    float* y) {
  Blocks<16>::pool(g, w, x, first, last, y);
}
__attribute__((target("avx2"))) void pool_avx2(const PoolGeometry& g, const Windows& w,
                                               const float* x, int64_t first, int64_t last,
                                               float* y) {
  Blocks<8>::pool(g, w, x, first, last, y);
}
void pool_baseline(const PoolGeometry& g, const Windows& w, const float* x, int64_t first,
                   int64_t last, float* y) {
  Blocks<4>::pool(g, w, x, first, last, y);
}
__attribute__((target("avx512f"))) void grad_avx512(const PoolGeometry& g, const Windows& w,
                                                    const float* x, const float* dy, int64_t first,
                                                    int64_t last, float* dx) {
  Blocks<16>::pool_grad(g, w, x, dy, first, last, dx);
}
__attribute__((target("avx2"))) void grad_avx2(const PoolGeometry& g, const Windows& w,
                                               const float* x, const float* dy, int64_t first,
                                               int64_t last, float* dx) {
  Blocks<8>::pool_grad(g, w, x, dy, first, last, dx);
}
void grad_baseline(const PoolGeometry& g, const Windows& w, const float* x, const float* dy,
                   int64_t first, int64_t last, float* dx) {
  Blocks<4>::pool_grad(g, w, x, dy, first, last, dx);
}

__attribute__((target("avx512f"))) void unit_avx512(const PoolGeometry& g, const Windows& w,
                                                    int64_t block, const float* x, bool xb,
                                                    float* y, bool yb) {
  Blocks<16>::pool_unit(g, w, block, x, xb, y, yb);
}
__attribute__((target("avx2"))) void unit_avx2(const PoolGeometry& g, const Windows& w,
                                               int64_t block, const float* x, bool xb, float* y,
                                               bool yb) {
  Blocks<8>::pool_unit(g, w, block, x, xb, y, yb);
}
void unit_baseline(const PoolGeometry& g, const Windows& w, int64_t block, const float* x, bool xb,
                   float* y, bool yb) {
  Blocks<4>::pool_unit(g, w, block, x, xb, y, yb);
}
__attribute__((target("avx512f"))) void unit_grad_avx512(const PoolGeometry& g, const Windows& w,
                                                         int64_t block, const float* x, bool xb,
                                                         const float* dy, bool dyb, float* dx,
                                                         bool dxb) {
  Blocks<16>::pool_grad_unit(g, w, block, x, xb, dy, dyb, dx, dxb);
}
__attribute__((target("avx2"))) void unit_grad_avx2(const PoolGeometry& g, const Windows& w,
                                                    int64_t block, const float* x, bool xb,
                                                    const float* dy, bool dyb, float* dx,
                                                    bool dxb) {
  Blocks<8>::pool_grad_unit(g, w, block, x, xb, dy, dyb, dx, dxb);
}
void unit_grad_baseline(const PoolGeometry& g, const Windows& w, int64_t block, const float* x,
                        bool xb, const float* dy, bool dyb, float* dx, bool dxb) {
  Blocks<4>::pool_grad_unit(g, w, block, x, xb, dy, dyb, dx, dxb);
}

// Calls fn(u, unit) for each (image, channel block) unit u of n images of c channels in blocks of
// `block`, threaded when large enough, with `unit` the widest of the ISA versions whose vectors
// divide the block.
template <class Unit, class Fn>
void for_block_units(const PoolGeometry& g, int64_t n, int64_t c, int64_t block, Unit avx512,
                     Unit avx2, Unit baseline, Fn fn) {
  Unit unit = baseline;
  if (vector_isa() == VectorIsa::kAvx512 && block % 16 == 0) {
    unit = avx512;
  } else if (vector_isa() != VectorIsa::kBaseline) {
    unit = avx2;
  }
  const int64_t units = n * (c / block);
  parallel_for(units, units * g.h * g.w * block > kParallelMinArithmetic,
               [&](int64_t u) { fn(u, unit); });
}

// Calls fn(first, last) for the tasks' plane ranges, threaded when the planes are large enough.
template <class Fn>
void for_plane_ranges(const PoolGeometry& g, Fn fn) {
  const int64_t tasks = (g.planes + kPlanesPerTask - 1) / kPlanesPerTask;
  parallel_for(tasks, g.planes * g.h * g.w > kParallelMinArithmetic, [&](int64_t t) {
    const int64_t first = t * kPlanesPerTask;
    fn(first, std::min(g.planes, first + kPlanesPerTask));
  });
}

}  // namespace

bool use_pool_lanes(const PoolGeometry& g) { return !is_max_2x2(g) && g.h * g.w <= kMaxLanePlane; }

void pool_lanes(const PoolGeometry& g, const float* x, float* y) {
  const Windows windows = windows_of(g);
  for_plane_ranges(g, [&](int64_t first, int64_t last) {
    call_for_vector_isa(pool_avx512, pool_avx2, pool_baseline, g, windows, x, first, last, y);
  });
}

void pool_grad_lanes(const PoolGeometry& g, const float* x, const float* dy, float* dx) {
  const Windows windows = windows_of(g);
  for_plane_ranges(g, [&](int64_t first, int64_t last) {
    call_for_vector_isa(grad_avx512, grad_avx2, grad_baseline, g, windows, x, dy, first, last, dx);
  });
}

void pool_lanes_blocked(const PoolGeometry& g, int64_t n, int64_t c, int64_t block, const float* x,
                        bool x_blocked, float* y, bool y_blocked) {
  const Windows windows = windows_of(g);
  const int64_t in_unit = g.h * g.w * block, out_unit = g.ho * g.wo * block;
  for_block_units(g, n, c, block, unit_avx512, unit_avx2, unit_baseline, [&](int64_t u, auto unit) {
    unit(g, windows, block, x + u * in_unit, x_blocked, y + u * out_unit, y_blocked);
  });
}

void pool_grad_lanes_blocked(const PoolGeometry& g, int64_t n, int64_t c, int64_t block,
                             const float* x, bool x_blocked, const float* dy, bool dy_blocked,
                             float* dx, bool dx_blocked) {
  const Windows windows = windows_of(g);
  const int64_t in_unit = g.h * g.w * block, out_unit = g.ho * g.wo * block;
  for_block_units(g, n, c, block, unit_grad_avx512, unit_grad_avx2, unit_grad_baseline,
                  [&](int64_t u, auto unit) {
                    unit(g, windows, block, x + u * in_unit, x_blocked, dy + u * out_unit,
                         dy_blocked, dx + u * in_unit, dx_blocked);
                  });
}

}  // namespace purine
