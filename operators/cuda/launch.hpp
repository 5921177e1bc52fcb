// Launch geometry of the element-wise kernels, in functions the host tests check too (they
// compile without nvcc): a 1-D grid of kThreads-thread blocks covering n elements with a
// grid-stride loop, at most kMaxBlocks blocks (enough to fill any current GPU; more only adds
// scheduling), and the elements one thread visits.
#pragma once

#include <cstdint>

#include "base/host_device.hpp"

namespace purine::cuda {

constexpr int kThreads = 256;
constexpr int kWarp = 32;                         // threads of a warp
constexpr int kWarpsPerBlock = kThreads / kWarp;  // for kernels that give each warp a row
constexpr int64_t kMaxBlocks = 4096;

// Blocks for n elements: ceil(n / kThreads), at least 1, at most kMaxBlocks.
PURINE_HOST_DEVICE inline int blocks_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

// How many of n elements thread `thread` of a `blocks` x kThreads grid visits (for tests: the
// counts over all threads add up to n, each element exactly once).
PURINE_HOST_DEVICE inline int64_t elements_of_thread(int64_t n, int blocks, int64_t thread) {
  const int64_t stride = static_cast<int64_t>(blocks) * kThreads;
  return thread >= n ? 0 : (n - thread + stride - 1) / stride;
}

}  // namespace purine::cuda
