// DeviceGuard: makes a device current on this thread for a scope, then restores the previous one
// (the runtime's calls act on the current device; threads other than a device's executor may
// call them).
#pragma once

#include <cuda_runtime.h>

#include "operators/cuda/cuda_check.hpp"

namespace purine::cuda {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    PURINE_CUDA_CALL("device guard", cudaGetDevice(&previous_));
    if (previous_ != device) PURINE_CUDA_CALL("device guard", cudaSetDevice(device));
  }
  ~DeviceGuard() { (void)cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace purine::cuda
