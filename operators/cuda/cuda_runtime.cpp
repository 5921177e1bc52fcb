// The CUDA backend's DeviceRuntime (base/device_runtime.hpp), registered when libpurine loads.
// The device count is asked of the driver once, lazily: a machine without a GPU or a driver
// sees 0 devices and every GPU location is a clear error, never a crash at load time.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/device_runtime.hpp"
#include "base/error.hpp"
#include "operators/cuda/caching_allocator.hpp"
#include "operators/cuda/cuda_check.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/device_guard.hpp"

namespace purine::cuda {

namespace {

std::string version_text(int version) {  // 13000 -> "13.0"
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

std::string cudnn_version_text(size_t version) {  // 91900 -> "9.19.0"
  return std::to_string(version / 10000) + "." + std::to_string(version % 10000 / 100) + "." +
         std::to_string(version % 100);
}

class CudaRuntime : public DeviceRuntime {
 public:
  std::string name() const override {
    int runtime = 0, driver = 0;
    (void)cudaRuntimeGetVersion(&runtime);
    (void)cudaDriverGetVersion(&driver);
    return "CUDA " + version_text(runtime) +
           (driver > 0 ? " (driver " + version_text(driver) + ")" : " (no driver)") + ", cuDNN " +
           cudnn_version_text(cudnnGetVersion());
  }

  int device_count() const override {
    std::call_once(counted_, [this] {
      if (cudaGetDeviceCount(&count_) != cudaSuccess) {
        (void)cudaGetLastError();  // no driver, or no device: no GPU locations
        count_ = 0;
      }
      allocator_ = std::make_unique<CachingAllocator>(count_);
    });
    return count_;
  }

  std::vector<std::string> describe_devices() const override {
    std::vector<std::string> lines;
    for (int d = 0; d < device_count(); ++d) {
      cudaDeviceProp p{};
      PURINE_CUDA_CALL("devices", cudaGetDeviceProperties(&p, d));
      char memory[32];
      std::snprintf(memory, sizeof memory, "%.1f GiB", p.totalGlobalMem / double(1 << 30));
      lines.push_back(str("gpu", d, ": ", p.name, ", ", memory, ", compute capability ", p.major,
                          ".", p.minor, ", ", p.multiProcessorCount, " SMs"));
    }
    return lines;
  }

  void* allocate(int device, size_t bytes) override {
    require_device(device, "GPU memory");
    allocations_.fetch_add(1, std::memory_order_relaxed);
    void* block = allocator_->allocate(device, bytes);
    DeviceGuard on(device);
    PURINE_CUDA_CALL("allocate", cudaMemset(block, 0, bytes));  // tensors start zero-filled
    // The runs' streams do not wait for the default stream's memset: finish it now.
    PURINE_CUDA_CALL("allocate", cudaDeviceSynchronize());
    return block;
  }

  void release(int device, void* memory, size_t bytes) noexcept override {
    allocator_->release(device, memory, bytes);
  }

  void* allocate_pinned(size_t bytes) noexcept override {
    allocations_.fetch_add(1, std::memory_order_relaxed);
    void* memory = nullptr;
    if (cudaHostAlloc(&memory, bytes, cudaHostAllocPortable) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    std::memset(memory, 0, bytes);
    return memory;
  }

  void release_pinned(void* memory) noexcept override { (void)cudaFreeHost(memory); }

  DeviceMemoryStats memory_stats(int device) const override {
    require_device(device, "GPU memory statistics");
    return allocator_->stats(device);
  }

  void copy(void* to, Location to_at, const void* from, Location from_at, size_t bytes) override {
    const int device = to_at.is_cpu() ? from_at.device : to_at.device;
    synchronizations_.fetch_add(1, std::memory_order_relaxed);
    if (to_at.is_cpu() && !from_at.is_cpu()) device_to_host_.fetch_add(bytes);
    if (!to_at.is_cpu() && from_at.is_cpu()) host_to_device_.fetch_add(bytes);
    DeviceGuard on(device);
    if (!to_at.is_cpu() && !from_at.is_cpu() && to_at.device != from_at.device) {
      PURINE_CUDA_CALL("copy", cudaMemcpyPeer(to, to_at.device, from, from_at.device, bytes));
    } else {
      PURINE_CUDA_CALL("copy", cudaMemcpy(to, from, bytes, cudaMemcpyDefault));
    }
    // cudaMemcpy from pageable memory may return before the data lands, and the runs' streams
    // do not wait for the default stream: the copy is complete when this returns.
    PURINE_CUDA_CALL("copy", cudaDeviceSynchronize());
  }

  std::shared_ptr<DeviceQueue> make_queue(int device, const std::string& name) override {
    require_device(device, "stream " + name);
    return std::make_shared<CudaStream>(device, name);
  }

  void use_device(int device) override { PURINE_CUDA_CALL("executor", cudaSetDevice(device)); }

  DeviceCounters counters() const override {
    DeviceCounters c;
    c.synchronizations = synchronizations_.load();
    c.device_to_host_bytes = device_to_host_.load();
    c.host_to_device_bytes = host_to_device_.load();
    c.allocations = allocations_.load();
    return c;
  }

 private:
  std::atomic<int64_t> synchronizations_{0}, device_to_host_{0}, host_to_device_{0},
      allocations_{0};
  mutable std::once_flag counted_;
  mutable int count_ = 0;
  mutable std::unique_ptr<CachingAllocator> allocator_;
};

const bool registered = [] {
  // Never destroyed: tensors freed during static destruction still return their memory to it.
  register_device_runtime(new CudaRuntime());
  return true;
}();

}  // namespace

}  // namespace purine::cuda
