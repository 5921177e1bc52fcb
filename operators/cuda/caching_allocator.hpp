// CachingAllocator: device memory for tensors, one pool per device. A freed block is kept, keyed
// by its rounded size, and handed to the next request of that size, so a training loop that
// builds its graphs once and then runs them (or rebuilds graphs of the same shapes) calls
// cudaMalloc only while memory grows: never in the steady state. When cudaMalloc fails, the
// cache is returned to the driver and the request tried once more. Blocks are freed only
// outside runs (tensors outlive the runs that use them), so no stream can still be using a block
// that is handed out again.
//
// Thread-safety: all methods may be called from any thread (one mutex per device pool).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "base/device_runtime.hpp"

namespace purine::cuda {

class CachingAllocator {
 public:
  explicit CachingAllocator(int devices);
  ~CachingAllocator();  // leaks the cached blocks when the driver is already gone (at exit)
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` on `device`; throws purine::Error when the device is full.
  void* allocate(int device, size_t bytes);
  void release(int device, void* block, size_t bytes) noexcept;
  DeviceMemoryStats stats(int device) const;
  // The size a request of `bytes` is served with: 512-byte multiples below 1 MiB, 2 MiB ones
  // from there (fewer distinct sizes to cache; large tensors waste at most 2 MiB).
  static size_t rounded(size_t bytes);

 private:
  struct Pool {
    mutable std::mutex mu;
    std::multimap<size_t, void*> free_blocks;  // rounded size -> block
    DeviceMemoryStats stats;
  };
  std::vector<std::unique_ptr<Pool>> pools_;
};

}  // namespace purine::cuda
