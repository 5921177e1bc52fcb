// Per-channel work on a contiguous [N, C, inner] tensor (inner = the product of the dimensions
// after C; 1 for [N, C]), for bias, batch norm and sum_squares (as [1, 1, n]).
//
// for_each_in_channels: a grid-stride loop over the elements that tracks each element's channel
// with additions only (one division per thread at the start, none per element). The index
// arithmetic (ChannelWalk, PlaneWalk, slicing_of) is in channel_walk.hpp, checked by host tests.
//
// reduce_channels<K>: K sums per channel over its N * inner values, in two stages whose order
// depends on the shape alone, so the totals are bit-identical run to run:
//   1. a (C, slices) grid of blocks: block (c, s) adds slice s (a fixed range of the channel's
//      values in (sample, position) order) with a fixed per-thread stride, then block_sum, and
//      writes one partial per sum. Adjacent threads read adjacent positions of a plane; for
//      inner == 1 ([N, C]) the block instead covers 32 channels x a range of samples, lanes
//      along the channels, so the loads stay coalesced.
//   2. one warp per channel adds its slices' partials (lane l: slices l, l + 32, ... in order,
//      then warp_sum) and calls finish(c, totals) on lane 0.
// A channel of one slice (up to kPerThread values per thread: the [N, C] gradients of an MLP's
// layers) skips stage 2: stage 1 calls finish with its sums, one kernel instead of two and the
// same doubles (stage 2 would add zeros to the one partial, and no sum started from +0 is -0).
// Partials are doubles in caller-provided scratch (the stream's workspace; reduce_channels_bytes
// says how much), laid out [K][C][slices]. Values add in double; `values(c, i, acc)` adds what
// element i (an offset into the tensor) of channel c contributes to each of the K sums.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "operators/cuda/channel_walk.hpp"
#include "operators/cuda/cuda_check.hpp"
#include "operators/cuda/launch.hpp"
#include "operators/cuda/reduce.cuh"

namespace purine::cuda {

// ---- element-wise with the channel ----

// f(i, c) for every element i, c its channel.
template <typename F>
__global__ void for_each_in_channels_kernel(ChannelLayout l, F f) {
  const int64_t count = l.count(), stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  for (ChannelWalk walk(l, i, stride); i < count; i += stride, walk.advance()) f(i, walk.c);
}

template <typename F>
void for_each_in_channels(const char* what, cudaStream_t stream, const ChannelLayout& l, F f) {
  const int64_t count = l.count();
  if (count == 0) return;
  for_each_in_channels_kernel<<<blocks_for(count), kThreads, 0, stream>>>(l, f);
  PURINE_CUDA_LAUNCHED(what);
}

// ---- reductions ----

inline size_t reduce_channels_bytes(int sums, const ChannelLayout& l) {
  return static_cast<size_t>(sums * l.channels * slicing_of(l).slices) * sizeof(double);
}

// Stage 1, inner > 1: block (c, s) adds values [s chunk, (s + 1) chunk) of channel c (in
// (sample, position) order); thread t visits values begin + t, + kThreads, ... With one slice
// it finishes the channel itself.
template <int K, typename Values, typename Finish>
__global__ void plane_partials(ChannelLayout l, int64_t chunk, Values values, double* partials,
                               Finish finish) {
  const int64_t c = blockIdx.x, s = blockIdx.y, slices = gridDim.y;
  const int64_t begin = s * chunk, end = min(begin + chunk, l.samples * l.inner);
  Sums<K> acc{};
  int64_t m = begin + threadIdx.x;
  if (m < end) {  // so inner > 0
    PlaneWalk walk(l, c, m, kThreads);
#pragma unroll 4
    for (; m < end; m += kThreads, walk.advance()) values(c, walk.at, acc.v);
  }
  acc = block_sum(acc);
  if (threadIdx.x != 0) return;
  if (slices == 1) {
    finish(c, acc.v);
    return;
  }
  for (int k = 0; k < K; ++k) partials[(k * l.channels + c) * slices + s] = acc.v[k];
}

// Stage 1, inner == 1: block (b, s) covers channels 32 b + lane and samples [s chunk, (s + 1)
// chunk); warp w visits samples begin + w, + kWarpsPerBlock, ...; the warps' sums are then
// added in warp order. With one slice it finishes the channels itself.
template <int K, typename Values, typename Finish>
__global__ void column_partials(ChannelLayout l, int64_t chunk, Values values, double* partials,
                                Finish finish) {
  __shared__ double warp_sums[K][kWarpsPerBlock][kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int64_t c = blockIdx.x * int64_t(kWarp) + lane, s = blockIdx.y, slices = gridDim.y;
  const int64_t begin = s * chunk, end = min(begin + chunk, l.samples);
  Sums<K> acc{};
  if (c < l.channels)
    for (int64_t n = begin + warp; n < end; n += kWarpsPerBlock)
      values(c, n * l.channels + c, acc.v);
  for (int k = 0; k < K; ++k) warp_sums[k][warp][lane] = acc.v[k];
  __syncthreads();
  if (warp != 0 || c >= l.channels) return;
  double totals[K];
  for (int k = 0; k < K; ++k) {
    totals[k] = 0;
    for (int w = 0; w < kWarpsPerBlock; ++w) totals[k] += warp_sums[k][w][lane];
  }
  if (slices == 1) {
    finish(c, totals);
    return;
  }
  for (int k = 0; k < K; ++k) partials[(k * l.channels + c) * slices + s] = totals[k];
}

// Stage 2: warp w of block b finishes channel b kWarpsPerBlock + w.
template <int K, typename Finish>
__global__ void finish_channels(int64_t channels, int64_t slices, const double* partials,
                                Finish finish) {
  const int64_t c = warp_row();
  if (c >= channels) return;  // the whole warp
  const int lane = threadIdx.x % kWarp;
  double totals[K];
  for (int k = 0; k < K; ++k) {
    const double* own = partials + (k * channels + c) * slices;
    double sum = 0;
    for (int64_t i = lane; i < slices; i += kWarp) sum += own[i];
    totals[k] = warp_sum(sum);
  }
  if (lane == 0) finish(c, totals);
}

// Both stages on `stream`; `partials` holds reduce_channels_bytes(K, l). Needs C > 0.
template <int K, typename Values, typename Finish>
void reduce_channels(const char* what, cudaStream_t stream, const ChannelLayout& l,
                     double* partials, Values values, Finish finish) {
  const Slicing s = slicing_of(l);
  if (l.inner == 1) {
    const dim3 grid(static_cast<unsigned>((l.channels + kWarp - 1) / kWarp),
                    static_cast<unsigned>(s.slices));
    column_partials<K><<<grid, kThreads, 0, stream>>>(l, s.chunk, values, partials, finish);
  } else {
    const dim3 grid(static_cast<unsigned>(l.channels), static_cast<unsigned>(s.slices));
    plane_partials<K><<<grid, kThreads, 0, stream>>>(l, s.chunk, values, partials, finish);
  }
  PURINE_CUDA_LAUNCHED(what);
  if (s.slices == 1) return;
  finish_channels<K><<<blocks_for_rows(l.channels), kThreads, 0, stream>>>(l.channels, s.slices,
                                                                           partials, finish);
  PURINE_CUDA_LAUNCHED(what);
}

}  // namespace purine::cuda
