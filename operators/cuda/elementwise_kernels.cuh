// The element-wise kernel template of the GPU backend: out[i] = f(in0[i], in1[i], ...) over n
// elements with a grid-stride loop (launch.hpp), launched on the op's stream. Shapes and
// contiguity are checked by Operator::compute().
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/tensor.hpp"
#include "operators/cuda/cuda_check.hpp"
#include "operators/cuda/launch.hpp"

namespace purine::cuda {

template <typename F>
__global__ void map1(int64_t n, const float* x, float* y, F f) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = f(x[i]);
}

template <typename F>
__global__ void map2(int64_t n, const float* a, const float* b, float* y, F f) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = f(a[i], b[i]);
}

template <typename F>
void launch_map1(const char* type, cudaStream_t stream, const Tensor& x, Tensor& y, F f) {
  const int64_t n = x.count();
  if (n == 0) return;
  map1<<<blocks_for(n), kThreads, 0, stream>>>(n, x.data(), y.mutable_data(), f);
  PURINE_CUDA_LAUNCHED(type);
}

template <typename F>
void launch_map2(const char* type, cudaStream_t stream, const Tensor& a, const Tensor& b, Tensor& y,
                 F f) {
  const int64_t n = a.count();
  if (n == 0) return;
  map2<<<blocks_for(n), kThreads, 0, stream>>>(n, a.data(), b.data(), y.mutable_data(), f);
  PURINE_CUDA_LAUNCHED(type);
}

}  // namespace purine::cuda
