// The max-pooling GPU kernels (max_pool.cu) that operators/cuda/pool.cpp calls for mode "max":
// forward and gradient as the CPU kernel computes them, bit for bit (max_pool_index.hpp has the
// semantics), deterministic (the gradient gathers: no atomics). Contiguous NCHW tensors on the
// current device, launched on `stream`; `type` names the operator in errors.
#pragma once

#include <cuda_runtime.h>

#include "operators/pool.hpp"

namespace purine::cuda {

// y [planes, ho, wo] from x [planes, h, w].
void max_pool_forward(const char* type, const PoolGeometry& g, const float* x, float* y,
                      cudaStream_t stream);

// dx [planes, h, w] from x and dy [planes, ho, wo].
void max_pool_backward(const char* type, const PoolGeometry& g, const float* x, const float* dy,
                       float* dx, cudaStream_t stream);

}  // namespace purine::cuda
