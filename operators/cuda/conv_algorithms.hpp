// Which cuDNN algorithm runs a convolution of one geometry in one direction: chosen once per
// (device, direction, geometry, deterministic) from cuDNN's heuristics, the fastest one whose
// workspace fits the limit and, when asked, that is deterministic; then cached for the process
// (thread-safe).
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <string>

#include "operators/conv.hpp"

namespace purine::cuda {

// Workspace a convolution may use (cuDNN's faster algorithms trade memory for time).
constexpr size_t kConvWorkspaceLimit = size_t{512} << 20;

struct ConvAlgorithm {
  int algo = 0;  // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  size_t workspace = 0;
};

// The algorithm for `direction` on `g` (descriptors built by the caller from g).
ConvAlgorithm choose_conv_algorithm(cudnnHandle_t handle, int device, ConvDirection direction,
                                    const ConvGeometry& g, bool deterministic,
                                    cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                                    cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y);

}  // namespace purine::cuda
