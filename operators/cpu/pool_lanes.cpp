#include "operators/cpu/pool_lanes.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

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
// (the build targets plain x86-64). pool_lanes.cpp builds with -ffp-contract=off: avg's gradient
// scales and then adds, and a fused multiply-add would round once where the baseline rounds
// twice.
#define PURINE_POOL_INLINE inline __attribute__((always_inline))

// Vectors of L floats and of L offsets (a struct of their own: GCC 12 drops vector_size from a
// typedef in the class template that uses it).
template <int L>
struct LaneTypes {
  typedef float Lanes __attribute__((vector_size(L * sizeof(float))));
  typedef int32_t Offsets __attribute__((vector_size(L * sizeof(int32_t))));
};

// Pooling in blocks of L planes, one vector of L floats per pixel.
template <int L>
struct Blocks {
  using Lanes = typename LaneTypes<L>::Lanes;
  using Offsets = typename LaneTypes<L>::Offsets;

  static PURINE_POOL_INLINE Lanes load(const float* p) {
    Lanes v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static PURINE_POOL_INLINE void store(float* p, Lanes v) { std::memcpy(p, &v, sizeof v); }

  // The even and the odd elements of a then b; and the inverse, a and b interleaved element by
  // element (zip_low: their first halves, zip_high: their second halves).
  template <int... I>
  static PURINE_POOL_INLINE Lanes even(Lanes a, Lanes b, std::integer_sequence<int, I...>) {
    return __builtin_shufflevector(a, b, (2 * I)...);
  }
  template <int... I>
  static PURINE_POOL_INLINE Lanes odd(Lanes a, Lanes b, std::integer_sequence<int, I...>) {
    return __builtin_shufflevector(a, b, (2 * I + 1)...);
  }
  template <int... I>
  static PURINE_POOL_INLINE Lanes zip_low(Lanes a, Lanes b, std::integer_sequence<int, I...>) {
    return __builtin_shufflevector(a, b, (I % 2 ? L + I / 2 : I / 2)...);
  }
  template <int... I>
  static PURINE_POOL_INLINE Lanes zip_high(Lanes a, Lanes b, std::integer_sequence<int, I...>) {
    return __builtin_shufflevector(a, b, (I % 2 ? L + L / 2 + I / 2 : L / 2 + I / 2)...);
  }
  using Index = std::make_integer_sequence<int, L>;

  // v[0..P) hold P * L consecutive floats; afterwards v[q] holds those at q, q + P, q + 2P, ...
  // (P a power of two): log2(P) rounds of splitting pairs into even and odd elements. With P =
  // L this transposes L x L.
  template <int P>
  static PURINE_POOL_INLINE void deinterleave(Lanes* v) {
#pragma GCC unroll 4
    for (int round = 1; round < P; round *= 2) {
      Lanes next[P];
#pragma GCC unroll 16
      for (int i = 0; i < P / 2; ++i) {
        next[i] = even(v[2 * i], v[2 * i + 1], Index());
        next[i + P / 2] = odd(v[2 * i], v[2 * i + 1], Index());
      }
#pragma GCC unroll 16
      for (int i = 0; i < P; ++i) v[i] = next[i];
    }
  }
  // The inverse of deinterleave<P>.
  template <int P>
  static PURINE_POOL_INLINE void interleave(Lanes* v) {
#pragma GCC unroll 4
    for (int round = 1; round < P; round *= 2) {
      Lanes next[P];
#pragma GCC unroll 16
      for (int i = 0; i < P / 2; ++i) {
        next[2 * i] = zip_low(v[i], v[i + P / 2], Index());
        next[2 * i + 1] = zip_high(v[i], v[i + P / 2], Index());
      }
#pragma GCC unroll 16
      for (int i = 0; i < P; ++i) v[i] = next[i];
    }
  }

  // A whole block whose planes have P pixels (P = 1, 2, 4, ... up to L) lies in P consecutive
  // vectors: tile[q][l] = x[l * P + q] by deinterleave<P>. False when `plane` is none of those.
  template <int P = 1>
  static PURINE_POOL_INLINE bool packed_to_tile(const float* x, int64_t plane, Lanes* tile) {
    if constexpr (P > L) {
      return false;
    } else {
      if (plane != P) return packed_to_tile<2 * P>(x, plane, tile);
      Lanes v[P];
#pragma GCC unroll 16
      for (int i = 0; i < P; ++i) v[i] = load(x + i * L);
      deinterleave<P>(v);
#pragma GCC unroll 16
      for (int i = 0; i < P; ++i) tile[i] = v[i];
      return true;
    }
  }
  template <int P = 1>
  static PURINE_POOL_INLINE bool packed_from_tile(const Lanes* tile, int64_t plane, float* y) {
    if constexpr (P > L) {
      return false;
    } else {
      if (plane != P) return packed_from_tile<2 * P>(tile, plane, y);
      Lanes v[P];
#pragma GCC unroll 16
      for (int i = 0; i < P; ++i) v[i] = tile[i];
      interleave<P>(v);
#pragma GCC unroll 16
      for (int i = 0; i < P; ++i) store(y + i * L, v[i]);
      return true;
    }
  }

  // tile[q][l] = x[l * plane + q] for the first `lanes` planes (the other lanes keep whatever
  // they held: computed on, never stored). Whole blocks go by shuffles: packed, or L pixels at a
  // time as L x L transposes of rows `plane` apart.
  static PURINE_POOL_INLINE void to_tile(const float* x, int64_t plane, int64_t lanes,
                                         Lanes* tile) {
    int64_t q = 0;
    if (lanes == L) {
      if (packed_to_tile(x, plane, tile)) return;
      for (; q + L <= plane; q += L) {
        Lanes v[L];
#pragma GCC unroll 16
        for (int l = 0; l < L; ++l) v[l] = load(x + l * plane + q);
        deinterleave<L>(v);
#pragma GCC unroll 16
        for (int i = 0; i < L; ++i) tile[q + i] = v[i];
      }
    }
    for (; q < plane; ++q)
      for (int64_t l = 0; l < lanes; ++l) tile[q][l] = x[l * plane + q];
  }
  // The inverse: y[l * plane + q] = tile[q][l] for the first `lanes` planes.
  static PURINE_POOL_INLINE void from_tile(const Lanes* tile, int64_t plane, int64_t lanes,
                                           float* y) {
    int64_t q = 0;
    if (lanes == L) {
      if (packed_from_tile(tile, plane, y)) return;
      for (; q + L <= plane; q += L) {
        Lanes v[L];
#pragma GCC unroll 16
        for (int i = 0; i < L; ++i) v[i] = tile[q + i];
        interleave<L>(v);
#pragma GCC unroll 16
        for (int l = 0; l < L; ++l) store(y + l * plane + q, v[l]);
      }
    }
    for (; q < plane; ++q)
      for (int64_t l = 0; l < lanes; ++l) y[l * plane + q] = tile[q][l];
  }

  // The piece at `offset` of the calling thread's workspace, as a tile (64-byte aligned, as
  // vectors of 16 floats need; a std::vector of them is not).
  static PURINE_POOL_INLINE Lanes* tile_at(char* workspace, size_t offset) {
    return reinterpret_cast<Lanes*>(workspace + offset);
  }

  // Planes [first, last) of x pooled into y, L at a time.
  static PURINE_POOL_INLINE void pool(const PoolGeometry& g, const Windows& windows, const float* x,
                                      int64_t first, int64_t last, float* y) {
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
  static PURINE_POOL_INLINE void pool_grad(const PoolGeometry& g, const Windows& windows,
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
