// Index arithmetic of the max-pooling GPU kernels (max_pool.cu), in host-and-device code that the
// host tests run too (they compile without nvcc): which windows cover an input element, a
// window's first maximum, one output of the forward pass, one element of the gradient gathered
// from the windows that chose it, and the tiles of the gradient kernel with what they keep in
// shared memory. The semantics are the CPU kernel's (operators/cpu/pool.cpp): a window's value
// and gradient belong to its FIRST maximum in row-major order (a scan with a strict >), and an
// element's gradient adds dy over the windows that chose it in (oh, ow) order, starting from 0,
// so GPU and CPU agree bit for bit. Coordinates inside a plane are int (the caller checks that a
// plane holds fewer than 2^31 elements); plane offsets are int64_t.
#pragma once

#include <cstdint>

#include "operators/cuda/launch.hpp"

namespace purine::cuda {

// One max pooling's sizes (operators/pool.hpp's PoolGeometry, as a kernel argument).
struct MaxPoolShape {
  int64_t planes;
  int h, w, ho, wo;
  int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
};

// The outputs [lo, hi] along one axis; empty when lo > hi.
struct IndexRange {
  int lo, hi;
};

// The outputs o (0 <= o < outputs) whose windows [o stride - pad, o stride - pad + kernel) cover
// input i (0 <= i, pad < kernel): o stride - pad <= i gives o <= (i + pad) / stride, and
// o stride - pad + kernel > i gives o >= (i + pad - kernel) / stride + 1 (or 0 where negative).
PURINE_HOST_DEVICE inline IndexRange windows_covering(int i, int kernel, int stride, int pad,
                                                      int outputs) {
  const int before = i + pad - kernel;
  const int hi = (i + pad) / stride;
  return {before < 0 ? 0 : before / stride + 1, hi < outputs - 1 ? hi : outputs - 1};
}

// The part of window o inside the input [0, size): [begin, end).
struct Span {
  int begin, end;
};
PURINE_HOST_DEVICE inline Span window_span(int o, int kernel, int stride, int pad, int size) {
  const int start = o * stride - pad;
  return {start < 0 ? 0 : start, start + kernel < size ? start + kernel : size};
}

// The offset (row * pitch + column) of the first maximum of rows [rows.begin, rows.end) x
// columns [cols.begin, cols.end) of x (never empty), scanning rows then columns with a strict >
// as the CPU kernel does.
PURINE_HOST_DEVICE inline int first_max(const float* x, int pitch, Span rows, Span cols) {
  int best = rows.begin * pitch + cols.begin;
  float m = x[best];
  for (int r = rows.begin; r < rows.end; ++r) {
    for (int c = cols.begin; c < cols.end; ++c) {
      const float v = x[r * pitch + c];
      if (v > m) {
        m = v;
        best = r * pitch + c;
      }
    }
  }
  return best;
}

// Output (oh, ow) of the forward pass, `x` the plane.
PURINE_HOST_DEVICE inline float max_pool_output(const MaxPoolShape& s, const float* x, int oh,
                                                int ow) {
  const Span rows = window_span(oh, s.kernel_h, s.stride_h, s.pad_h, s.h);
  const Span cols = window_span(ow, s.kernel_w, s.stride_w, s.pad_w, s.w);
  return x[first_max(x, s.w, rows, cols)];
}

// dx at (h, w) of one plane (x, dy the plane's), each covering window's first maximum found again
// in x: the gradient kernel's fallback for windows too large for the tiles' shared memory.
PURINE_HOST_DEVICE inline float max_pool_gradient(const MaxPoolShape& s, const float* x,
                                                  const float* dy, int h, int w) {
  const IndexRange ohs = windows_covering(h, s.kernel_h, s.stride_h, s.pad_h, s.ho);
  const IndexRange ows = windows_covering(w, s.kernel_w, s.stride_w, s.pad_w, s.wo);
  const int self = h * s.w + w;
  float sum = 0.0f;
  for (int oh = ohs.lo; oh <= ohs.hi; ++oh) {
    const Span rows = window_span(oh, s.kernel_h, s.stride_h, s.pad_h, s.h);
    for (int ow = ows.lo; ow <= ows.hi; ++ow) {
      const Span cols = window_span(ow, s.kernel_w, s.stride_w, s.pad_w, s.w);
      if (first_max(x, s.w, rows, cols) == self) sum += dy[oh * s.wo + ow];
    }
  }
  return sum;
}

// The tiled gradient kernel: a block takes a tile of tile_h x tile_w elements of one plane (up to
// kMaxPoolTileElements, a few per thread), copies the part of x its covering windows read (the
// region) and those windows' dy to shared memory, finds each covering window's first maximum once
// (its offset in the region, an int), and then gathers each element's gradient from the windows
// that chose it: no global load waits inside the gather. Windows on a tile's edge
// are found again by the neighbouring tile (the same result: the same scan of the same values).
// Bounds (for the shared memory): the windows covering t consecutive rows start in a span of
// t + kernel - 1 rows, so at most ceil((t + kernel - 1) / stride) of them, and they read at most
// (windows - 1) stride + kernel rows.
constexpr int kMaxPoolTileThreads = 256;
constexpr int kMaxPoolTileElements = 1024;
constexpr int kMaxPoolTileWidth = 32;
constexpr int64_t kMaxPoolSharedBytes = 48 * 1024;  // what a block gets without opting in

struct MaxPoolTiling {
  int tile_h, tile_w, tiles_h, tiles_w;
  int threads;               // tile_h x tile_w rounded up to whole warps
  int windows_h, windows_w;  // at most this many covering windows per tile
  int region_h, region_w;    // at most this much of x read per tile
  PURINE_HOST_DEVICE int64_t region_floats() const { return int64_t{region_h} * region_w; }
  PURINE_HOST_DEVICE int64_t window_count() const { return int64_t{windows_h} * windows_w; }
  int64_t shared_bytes() const {
    // The region, then each window's argmax offset (int) and dy (float).
    return region_floats() * int64_t{sizeof(float)} +
           window_count() * int64_t{sizeof(int) + sizeof(float)};
  }
  // Whether the tiled kernel can run (else the fallback: max_pool_gradient per element).
  bool fits() const { return shared_bytes() <= kMaxPoolSharedBytes; }
};

inline int most_windows(int elements, int kernel, int stride, int outputs) {
  const int n = (elements + kernel - 1 + stride - 1) / stride;
  return n < outputs ? n : outputs;
}

inline MaxPoolTiling max_pool_tiling(const MaxPoolShape& s) {
  MaxPoolTiling t;
  t.tile_w = s.w < kMaxPoolTileWidth ? s.w : kMaxPoolTileWidth;
  const int rows = kMaxPoolTileElements / t.tile_w;
  t.tile_h = s.h < rows ? s.h : rows;
  t.tiles_h = (s.h + t.tile_h - 1) / t.tile_h;
  t.tiles_w = (s.w + t.tile_w - 1) / t.tile_w;
  const int threads = (t.tile_h * t.tile_w + kWarp - 1) / kWarp * kWarp;
  t.threads = threads < kMaxPoolTileThreads ? threads : kMaxPoolTileThreads;
  t.windows_h = most_windows(t.tile_h, s.kernel_h, s.stride_h, s.ho);
  t.windows_w = most_windows(t.tile_w, s.kernel_w, s.stride_w, s.wo);
  const int region_h = (t.windows_h - 1) * s.stride_h + s.kernel_h;
  const int region_w = (t.windows_w - 1) * s.stride_w + s.kernel_w;
  t.region_h = region_h < s.h ? region_h : s.h;
  t.region_w = region_w < s.w ? region_w : s.w;
  return t;
}

// Tile `tile` (of tiles_h x tiles_w) of a plane: its elements, covering windows and region.
struct MaxPoolTile {
  int row0, col0;       // its first element
  IndexRange ohs, ows;  // the windows covering it (either may be empty)
  int region_row0, region_col0, region_h, region_w;  // the part of x they read
  PURINE_HOST_DEVICE int window_count() const {
    const int rows = ohs.hi - ohs.lo + 1, cols = ows.hi - ows.lo + 1;
    return rows > 0 && cols > 0 ? rows * cols : 0;
  }
};

PURINE_HOST_DEVICE inline MaxPoolTile max_pool_tile(const MaxPoolShape& s, const MaxPoolTiling& t,
                                                    int tile) {
  MaxPoolTile p;
  p.row0 = tile / t.tiles_w * t.tile_h;
  p.col0 = tile % t.tiles_w * t.tile_w;
  const int row1 = p.row0 + t.tile_h < s.h ? p.row0 + t.tile_h : s.h;  // exclusive
  const int col1 = p.col0 + t.tile_w < s.w ? p.col0 + t.tile_w : s.w;
  // lo and hi grow with the element, so the windows covering the tile are the first element's
  // first to the last element's last; each of them covers some element of the tile.
  p.ohs = {windows_covering(p.row0, s.kernel_h, s.stride_h, s.pad_h, s.ho).lo,
           windows_covering(row1 - 1, s.kernel_h, s.stride_h, s.pad_h, s.ho).hi};
  p.ows = {windows_covering(p.col0, s.kernel_w, s.stride_w, s.pad_w, s.wo).lo,
           windows_covering(col1 - 1, s.kernel_w, s.stride_w, s.pad_w, s.wo).hi};
  if (p.ohs.lo > p.ohs.hi || p.ows.lo > p.ows.hi) {  // no window: every dx of the tile is 0
    p.region_row0 = p.row0;
    p.region_col0 = p.col0;
    p.region_h = p.region_w = 0;
    return p;
  }
  const Span rows = {window_span(p.ohs.lo, s.kernel_h, s.stride_h, s.pad_h, s.h).begin,
                     window_span(p.ohs.hi, s.kernel_h, s.stride_h, s.pad_h, s.h).end};
  const Span cols = {window_span(p.ows.lo, s.kernel_w, s.stride_w, s.pad_w, s.w).begin,
                     window_span(p.ows.hi, s.kernel_w, s.stride_w, s.pad_w, s.w).end};
  p.region_row0 = rows.begin;
  p.region_col0 = cols.begin;
  p.region_h = rows.end - rows.begin;
  p.region_w = cols.end - cols.begin;
  return p;
}

// Phase 2 of a tile: window j (row-major over p.ohs x p.ows, j < their count) -> the region
// offset of its first maximum, `region` holding x's rows and columns of the region.
PURINE_HOST_DEVICE inline int max_pool_tile_argmax(const MaxPoolShape& s, const MaxPoolTile& p,
                                                   const float* region, int j) {
  const int windows_w = p.ows.hi - p.ows.lo + 1;
  const int oh = p.ohs.lo + j / windows_w, ow = p.ows.lo + j % windows_w;
  Span rows = window_span(oh, s.kernel_h, s.stride_h, s.pad_h, s.h);
  Span cols = window_span(ow, s.kernel_w, s.stride_w, s.pad_w, s.w);
  rows = {rows.begin - p.region_row0, rows.end - p.region_row0};
  cols = {cols.begin - p.region_col0, cols.end - p.region_col0};
  return first_max(region, p.region_w, rows, cols);
}

// Phase 1, with the region: window j's dy, `dy` the plane's.
PURINE_HOST_DEVICE inline float max_pool_tile_dy(const MaxPoolShape& s, const MaxPoolTile& p,
                                                 const float* dy, int j) {
  const int windows_w = p.ows.hi - p.ows.lo + 1;
  return dy[(p.ohs.lo + j / windows_w) * s.wo + p.ows.lo + j % windows_w];
}

// Phase 3: dx of element (h, w) of the tile, `argmax` holding phase 2's offsets and `window_dy`
// the windows' dy (both row-major over p.ohs x p.ows).
PURINE_HOST_DEVICE inline float max_pool_tile_gradient(const MaxPoolShape& s, const MaxPoolTile& p,
                                                       const int* argmax, const float* window_dy,
                                                       int h, int w) {
  const IndexRange ohs = windows_covering(h, s.kernel_h, s.stride_h, s.pad_h, s.ho);
  const IndexRange ows = windows_covering(w, s.kernel_w, s.stride_w, s.pad_w, s.wo);
  const int windows_w = p.ows.hi - p.ows.lo + 1;
  const int self = (h - p.region_row0) * p.region_w + (w - p.region_col0);
  float sum = 0.0f;
  for (int oh = ohs.lo; oh <= ohs.hi; ++oh) {
    const int row = (oh - p.ohs.lo) * windows_w - p.ows.lo;
    for (int ow = ows.lo; ow <= ows.hi; ++ow) {
      if (argmax[row + ow] == self) sum += window_dy[row + ow];
    }
  }
  return sum;
}

}  // namespace purine::cuda
