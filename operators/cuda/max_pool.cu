// Max-pooling GPU kernels (max_pool.hpp), bit for bit the CPU kernel's results (the index
// arithmetic and the scans are in max_pool_index.hpp, which the host tests run too).
// Forward: one thread per output scans its window. Gradient: a gather, one thread per input
// element, which adds dy over the windows that chose it in (oh, ow) order and writes dx once (no
// atomics, no zero fill). Tiled (the usual case): a block copies the part of x that its tile's
// covering windows read, and their dy, to shared memory and finds each window's first maximum
// there once, so x and dy are read from memory about once and each window is scanned once per
// tile that it covers.
// Windows too large for the tiles' shared memory fall back to each element scanning its covering
// windows in global memory. Element counts below 2^31 index with int, larger ones with int64_t.
#include <climits>
#include <cstdint>

#include "base/error.hpp"
#include "operators/cuda/cuda_check.hpp"
#include "operators/cuda/launch.hpp"
#include "operators/cuda/max_pool.hpp"
#include "operators/cuda/max_pool_index.hpp"

namespace purine::cuda {

namespace {

template <typename Index>
__global__ void max_pool_forward_kernel(MaxPoolShape s, Index n, const float* __restrict__ x,
                                        float* __restrict__ y) {
  const Index out_plane = Index(s.ho) * s.wo;
  const int64_t in_plane = int64_t(s.h) * s.w;
  for (Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x; i < n;
       i += Index(gridDim.x) * blockDim.x) {
    const Index plane = i / out_plane;
    const int at = int(i - plane * out_plane);
    y[i] = max_pool_output(s, x + plane * in_plane, at / s.wo, at % s.wo);
  }
}

// The fallback: every element scans its covering windows in global memory.
template <typename Index>
__global__ void max_pool_backward_direct(MaxPoolShape s, Index n, const float* __restrict__ x,
                                         const float* __restrict__ dy, float* __restrict__ dx) {
  const Index in_plane = Index(s.h) * s.w;
  const int64_t out_plane = int64_t(s.ho) * s.wo;
  for (Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x; i < n;
       i += Index(gridDim.x) * blockDim.x) {
    const Index plane = i / in_plane;
    const int at = int(i - plane * in_plane);
    dx[i] = max_pool_gradient(s, x + plane * int64_t(in_plane), dy + plane * out_plane, at / s.w,
                              at % s.w);
  }
}

// Block b of `tiles` (planes x tiles per plane) takes tile b % (tiles per plane) of plane
// b / (tiles per plane); shared memory holds the region of x, then the windows' argmax offsets.
__global__ void max_pool_backward_tiles(MaxPoolShape s, MaxPoolTiling t, int64_t tiles,
                                        const float* __restrict__ x, const float* __restrict__ dy,
                                        float* __restrict__ dx) {
  extern __shared__ float shared[];
  float* region = shared;
  int* argmax = reinterpret_cast<int*>(shared + t.region_floats());
  float* window_dy = reinterpret_cast<float*>(argmax + t.window_count());
  const int tiles_per_plane = t.tiles_h * t.tiles_w;
  const int64_t in_plane = int64_t(s.h) * s.w, out_plane = int64_t(s.ho) * s.wo;
  for (int64_t b = blockIdx.x; b < tiles; b += gridDim.x) {  // the same count for the whole block
    const int64_t plane = b / tiles_per_plane;
    const MaxPoolTile p = max_pool_tile(s, t, int(b - plane * tiles_per_plane));
    const float* x_plane = x + plane * in_plane;
    const int count = p.region_h * p.region_w;
    for (int i = threadIdx.x; i < count; i += blockDim.x) {
      region[i] = x_plane[(p.region_row0 + i / p.region_w) * s.w + p.region_col0 + i % p.region_w];
    }
    const int windows = p.window_count();
    for (int j = threadIdx.x; j < windows; j += blockDim.x) {
      window_dy[j] = max_pool_tile_dy(s, p, dy + plane * out_plane, j);
    }
    __syncthreads();
    for (int j = threadIdx.x; j < windows; j += blockDim.x) {
      argmax[j] = max_pool_tile_argmax(s, p, region, j);
    }
    __syncthreads();
    for (int e = threadIdx.x; e < t.tile_h * t.tile_w; e += blockDim.x) {
      const int h = p.row0 + e / t.tile_w, w = p.col0 + e % t.tile_w;
      if (h < s.h && w < s.w) {
        dx[plane * in_plane + h * s.w + w] = max_pool_tile_gradient(s, p, argmax, window_dy, h, w);
      }
    }
    __syncthreads();  // before the next tile overwrites shared memory
  }
}

// The geometry as the kernels take it; throws purine::Error for planes of 2^31 elements or more.
MaxPoolShape shape_of(const char* type, const PoolGeometry& g) {
  require(g.h * g.w < INT_MAX && g.ho * g.wo < INT_MAX, type, ": a plane of ", g.h, "x", g.w,
          " has 2^31 elements or more; the GPU kernel indexes planes with int");
  return {g.planes,        int(g.h),        int(g.w),        int(g.ho),
          int(g.wo),       int(g.kernel_h), int(g.kernel_w), int(g.stride_h),
          int(g.stride_w), int(g.pad_h),    int(g.pad_w)};
}

// Whether a grid-stride loop over n elements can count with int without overflowing.
bool fits_int(int64_t n) { return n <= INT_MAX - int64_t{kThreads} * kMaxBlocks; }

}  // namespace

void max_pool_forward(const char* type, const PoolGeometry& g, const float* x, float* y,
                      cudaStream_t stream) {
  const MaxPoolShape s = shape_of(type, g);
  const int64_t n = g.planes * g.ho * g.wo;
  if (n == 0) return;
  if (fits_int(n)) {
    max_pool_forward_kernel<int><<<blocks_for(n), kThreads, 0, stream>>>(s, int(n), x, y);
  } else {
    max_pool_forward_kernel<int64_t><<<blocks_for(n), kThreads, 0, stream>>>(s, n, x, y);
  }
  PURINE_CUDA_LAUNCHED(type);
}

void max_pool_backward(const char* type, const PoolGeometry& g, const float* x, const float* dy,
                       float* dx, cudaStream_t stream) {
  const MaxPoolShape s = shape_of(type, g);
  const int64_t n = g.planes * g.h * g.w;
  if (n == 0) return;
  const MaxPoolTiling t = max_pool_tiling(s);
  if (t.fits()) {
    const int64_t tiles = g.planes * t.tiles_h * t.tiles_w;
    const int blocks = int(tiles < (int64_t{1} << 30) ? tiles : (int64_t{1} << 30));
    max_pool_backward_tiles<<<blocks, t.threads, size_t(t.shared_bytes()), stream>>>(s, t, tiles, x,
                                                                                     dy, dx);
  } else if (fits_int(n)) {
    max_pool_backward_direct<int><<<blocks_for(n), kThreads, 0, stream>>>(s, int(n), x, dy, dx);
  } else {
    max_pool_backward_direct<int64_t><<<blocks_for(n), kThreads, 0, stream>>>(s, n, x, dy, dx);
  }
  PURINE_CUDA_LAUNCHED(type);
}

}  // namespace purine::cuda
