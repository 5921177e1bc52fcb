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

  // Planes [first, last) of x pooled into y, L at a time.
  static PURINE_LANES_INLINE void pool(const PoolGeometry& g, const Windows& windows,
                                       const float* x, int64_t first, int64_t last, float* y) {
    const int64_t in_plane = g.h * g.w, out_plane = g.ho * g.wo;
    const int32_t* begin = windows.begin.data();
    const int32_t* offsets = windows.offsets.data();
    const float inv_area = 1.0f / static_cast<float>(g.kernel_h * g.kernel_w);
    WorkspaceLayout layout;
    const size_t in_at = layout.add(in_plane * sizeof(Lanes));
    const size_t out_at = layout.add(out_plane * sizeof(Lanes));
    char* workspace = thread_workspace(layout.bytes());
    Lanes* in = tile_at(workspace, in_at);
    Lanes* out = tile_at(workspace, out_at);
    for (int64_t p = first; p < last; p += L) {
      const int64_t lanes = std::min<int64_t>(L, last - p);
      to_tile(x + p * in_plane, in_plane, lanes, in);
      for (int64_t o = 0; o < out_plane; ++o) {
        if (g.max) {  // the first maximum: a later value wins only when greater
          Lanes m = in[offsets[begin[o]]];
          for (int32_t k = begin[o] + 1; k < begin[o + 1]; ++k) {
            const Lanes v = in[offsets[k]];
            m = v > m ? v : m;
          }
          out[o] = m;
        } else {  // the kernel's area divides, padding included
          Lanes sum = {};
          for (int32_t k = begin[o]; k < begin[o + 1]; ++k) sum += in[offsets[k]];
          out[o] = sum * inv_area;
        }
      }
      from_tile(out, out_plane, lanes, y + p * out_plane);
    }
  }

  // The gradient of planes [first, last): dx from x and dy, L planes at a time, summed in a tile
  // output by output as plane by plane. Max adds each output's gradient to every element of its
  // window, masked to +0 but at the first maximum: adding +0 leaves every sum of floats started
  // at +0 as it was, so the bits are those of adding the gradient at the maximum alone.
  static PURINE_LANES_INLINE void pool_grad(const PoolGeometry& g, const Windows& windows,
                                            const float* x, const float* dy, int64_t first,
                                            int64_t last, float* dx) {
    const int64_t in_plane = g.h * g.w, out_plane = g.ho * g.wo;
    const int32_t* begin = windows.begin.data();
    const int32_t* offsets = windows.offsets.data();
    const float inv_area = 1.0f / static_cast<float>(g.kernel_h * g.kernel_w);
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
      if (g.max) {
        to_tile(x + p * in_plane, in_plane, lanes, in);
        for (int64_t o = 0; o < out_plane; ++o) {
          const int32_t at = offsets[begin[o]];
          Lanes m = in[at];
          Offsets best = Offsets{} + at;
          for (int32_t k = begin[o] + 1; k < begin[o + 1]; ++k) {
            const Lanes v = in[offsets[k]];
            const Offsets more = v > m;
            m = more ? v : m;
            best = more ? Offsets{} + offsets[k] : best;
          }
          const Lanes v = grad[o];
          for (int32_t k = begin[o]; k < begin[o + 1]; ++k)
            sum[offsets[k]] += best == offsets[k] ? v : Lanes{};
        }
      } else {
        for (int64_t o = 0; o < out_plane; ++o) {
          const Lanes share = grad[o] * inv_area;
          for (int32_t k = begin[o]; k < begin[o + 1]; ++k) sum[offsets[k]] += share;
        }
      }
      from_tile(sum, in_plane, lanes, dx + p * in_plane);
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

}  // namespace purine
