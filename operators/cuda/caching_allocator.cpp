#include "operators/cuda/caching_allocator.hpp"

#include <glog/logging.h>

#include <algorithm>

#include "base/error.hpp"
#include "operators/cuda/cuda_check.hpp"
#include "operators/cuda/device_guard.hpp"

namespace purine::cuda {

CachingAllocator::CachingAllocator(int devices) {
  for (int d = 0; d < devices; ++d) pools_.push_back(std::make_unique<Pool>());
}

CachingAllocator::~CachingAllocator() {
  for (size_t d = 0; d < pools_.size(); ++d) {
    for (const auto& entry : pools_[d]->free_blocks) {
      // At process exit the CUDA runtime may be torn down before us; then there is nothing to
      // give back.
      if (cudaFree(entry.second) != cudaSuccess) return;
    }
  }
}

size_t CachingAllocator::rounded(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = 2 << 20, kLargeFrom = 1 << 20;
  bytes = std::max<size_t>(bytes, 1);
  const size_t unit = bytes < kLargeFrom ? kSmall : kLarge;
  return (bytes + unit - 1) / unit * unit;
}

void* CachingAllocator::allocate(int device, size_t bytes) {
  CHECK(device >= 0 && device < static_cast<int>(pools_.size()));
  Pool& pool = *pools_[device];
  const size_t size = rounded(bytes);
  std::lock_guard<std::mutex> lock(pool.mu);
  void* block = nullptr;
  auto hit = pool.free_blocks.find(size);
  if (hit != pool.free_blocks.end()) {
    block = hit->second;
    pool.free_blocks.erase(hit);
    pool.stats.cached -= size;
  } else {
    DeviceGuard on(device);
    cudaError_t status = cudaMalloc(&block, size);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear it, then give the cache back and try once more
      for (const auto& entry : pool.free_blocks) PURINE_CUDA_CALL("allocator", cudaFree(entry.second));
      pool.free_blocks.clear();
      pool.stats.cached = 0;
      status = cudaMalloc(&block, size);
    }
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      throw Error(str("out of GPU memory on gpu", device, ": cannot allocate ", size,
                      " bytes (tensors hold ", pool.stats.in_use, " bytes; ",
                      cudaGetErrorString(status), "); use a smaller batch or model"));
    }
    ++pool.stats.driver_allocations;
  }
  pool.stats.in_use += size;
  pool.stats.peak_in_use = std::max(pool.stats.peak_in_use, pool.stats.in_use);
  return block;
}

void CachingAllocator::release(int device, void* block, size_t bytes) noexcept {
  if (block == nullptr) return;
  Pool& pool = *pools_[device];
  const size_t size = rounded(bytes);
  std::lock_guard<std::mutex> lock(pool.mu);
  pool.free_blocks.emplace(size, block);
  pool.stats.in_use -= size;
  pool.stats.cached += size;
}

DeviceMemoryStats CachingAllocator::stats(int device) const {
  CHECK(device >= 0 && device < static_cast<int>(pools_.size()));
  std::lock_guard<std::mutex> lock(pools_[device]->mu);
  return pools_[device]->stats;
}

}  // namespace purine::cuda
