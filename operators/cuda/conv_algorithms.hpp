// Which cuDNN algorithm runs a convolution of one geometry in one direction: timed once per
// (device, direction, geometry, deterministic, math) by cuDNN's find (every algorithm run
// on scratch memory cuDNN allocates, as PyTorch's cudnn.benchmark does), the fastest whose
// workspace fits the limit, whose math is plain FMA unless GpuMath::kTf32 allows tensor ops,
// and, when asked, that is deterministic; then cached for the process (thread-safe). The timing
// runs synchronously on the caller's stream, on the first call of each geometry only. Under
// GpuMath::kExact the non-fused Winograd algorithms are left out too: their rounding is far
// coarser than float32's (a 5x5 data gradient was 3.5e-2 of an element off the CPU's on an H200,
// 4.5e-4 norm-wise). `GLOG_v=1` (or `purine train --v=1`) logs every algorithm cuDNN timed and
// the one chosen.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <string>

#include "operators/conv.hpp"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

// Workspace a convolution may use (cuDNN's faster algorithms trade memory for time).
constexpr size_t kConvWorkspaceLimit = size_t{512} << 20;

struct ConvAlgorithm {
  int algo = 0;  // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  size_t workspace = 0;
  cudnnMathType_t math = CUDNN_FMA_MATH;  // the convolution descriptor's math for it
};

// The algorithm for `direction` on `g` (descriptors built by the caller from g).
ConvAlgorithm choose_conv_algorithm(cudnnHandle_t handle, int device, ConvDirection direction,
                                    const ConvGeometry& g, bool deterministic, GpuMath math,
                                    cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                                    cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y);

// `algo` (a value of the direction's cuDNN enum) for `direction` on `g`, with the workspace it
// needs; throws purine::Error when cuDNN does not offer it for the geometry.
ConvAlgorithm forced_conv_algorithm(cudnnHandle_t handle, ConvDirection direction, int algo,
                                    bool tensor_ops, cudnnTensorDescriptor_t x,
                                    cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                                    cudnnTensorDescriptor_t y);

}  // namespace purine::cuda
