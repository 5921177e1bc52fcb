// Deterministic sums on the GPU: warp and block reductions whose order of additions is fixed by
// the launch shape alone (a shuffle tree inside each warp, then the warps in index order), so a
// kernel that picks its shape from the tensor's shape gives bit-identical results run to run.
// Also one-warp-per-row helpers (a row's softmax among them) and the mean of per-row values that
// the loss and accuracy use.
// Blocks are kThreads (launch.hpp) threads, a multiple of the warp size.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "operators/cuda/launch.hpp"

namespace purine::cuda {

constexpr unsigned kFullMask = 0xffffffffu;

// The sum over the 32 lanes (all must call it), added by a fixed tree and returned to every lane
// (each lane ends the tree with a different rounding, so lane 0's total is broadcast).
template <typename T>
__device__ T warp_sum(T value) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    value += __shfl_down_sync(kFullMask, value, offset);
  return __shfl_sync(kFullMask, value, 0);
}

// The maximum over the 32 lanes, on every lane (max is exact: the order does not matter).
__device__ inline float warp_max(float value) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_xor_sync(kFullMask, value, offset));
  return value;
}

// K running sums carried together (a statistic and its companion, e.g. sum(dy), sum(dy x)).
template <int K>
struct Sums {
  double v[K];
};

// The block's totals, valid in thread 0: each warp's tree, then the warps in index order. Every
// thread of the kThreads-thread block must call it, once per kernel (its shared memory is not
// re-synchronized for a second call).
template <int K>
__device__ Sums<K> block_sum(Sums<K> sums) {
  __shared__ double warp_totals[K][kWarpsPerBlock];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  for (int k = 0; k < K; ++k) sums.v[k] = warp_sum(sums.v[k]);
  if (lane == 0)
    for (int k = 0; k < K; ++k) warp_totals[k][warp] = sums.v[k];
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int k = 0; k < K; ++k) {
      double total = 0;
      for (int w = 0; w < kWarpsPerBlock; ++w) total += warp_totals[k][w];
      sums.v[k] = total;
    }
  }
  return sums;
}

// One warp per row: the row of this warp (rows_per_block = kWarpsPerBlock), and the blocks for
// `rows` rows.
__device__ inline int64_t warp_row() {
  return blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / kWarp;
}
inline unsigned blocks_for_rows(int64_t rows) {
  return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

// The max of one row of `classes` values and the sum of exp(x - max) over it, on every lane.
struct RowSoftmax {
  float max, sum;
};

// Writes the softmax of a row (`in` to `out`, lane l taking values l, l + 32, ...) with the
// row's max and exp-sum from warp shuffles in a fixed order, and returns those two.
__device__ inline RowSoftmax warp_softmax_row(const float* in, float* out, int64_t classes) {
  const int lane = threadIdx.x % kWarp;
  float max = -INFINITY;
  for (int64_t c = lane; c < classes; c += kWarp) max = fmaxf(max, in[c]);
  max = warp_max(max);
  float sum = 0.0f;
  for (int64_t c = lane; c < classes; c += kWarp) {
    out[c] = expf(in[c] - max);
    sum += out[c];
  }
  sum = warp_sum(sum);
  const float inv = 1.0f / sum;
  for (int64_t c = lane; c < classes; c += kWarp) out[c] *= inv;
  return {max, sum};
}

// *mean = the mean of n values (0 when n is 0), in one block: thread t adds values t, t +
// kThreads, ... in order, then block_sum. Launch <<<1, kThreads>>>. (A template only so that it
// may live in a header.)
template <typename T>
__global__ void mean_of(int64_t n, const T* values, float* mean) {
  Sums<1> sum{};
  for (int64_t i = threadIdx.x; i < n; i += kThreads) sum.v[0] += values[i];
  sum = block_sum(sum);
  if (threadIdx.x == 0) *mean = n > 0 ? float(sum.v[0] / double(n)) : 0.0f;
}

}  // namespace purine::cuda
