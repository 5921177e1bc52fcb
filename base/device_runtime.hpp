// DeviceRuntime: what a device backend (the CUDA one, operators/cuda/) gives the layers above it
// without their knowing CUDA: device memory for tensors at GPU locations, synchronous copies
// between any two locations (for code outside a run: initialization, checkpoints, tests), and
// the in-order queues (streams) that the dispatcher's device executors drive.
//
// The CUDA backend is a library of its own, libpurine_cuda.so beside libpurine.so, loaded the
// first time anything asks for the runtime or a GPU kernel; while loading it registers its one
// runtime and its kernels. A process that stays on the CPU never maps CUDA, cuBLAS, cuDNN or
// NCCL (their start-up alone cost every process 0.3 s), and a build with the backend runs on a
// machine without those libraries. Without the backend (not built, or not loadable) there is
// no runtime, and every use of a GPU location is a purine::Error saying why.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "base/device_queue.hpp"
#include "base/location.hpp"

namespace purine {

// What the layers above have asked of the runtime since the process started, over all devices:
// the training loop's budget is none of these per steady-state iteration (tests check it on an
// emulated device, dispatcher/emulated_devices.hpp).
struct DeviceCounters {
  int64_t synchronizations = 0;      // copy() calls: each waits for the device
  int64_t device_to_host_bytes = 0;  // read from a device by copy()
  int64_t host_to_device_bytes = 0;  // written to a device by copy()
  int64_t allocations = 0;           // allocate() and allocate_pinned() calls
};

// A device's memory as the backend's caching allocator sees it, in bytes.
struct DeviceMemoryStats {
  size_t in_use = 0;              // held by tensors now
  size_t peak_in_use = 0;         // the most ever held at once
  size_t cached = 0;              // freed by tensors, kept for reuse (not returned to the driver)
  size_t driver_allocations = 0;  // calls to the driver's allocator (cudaMalloc) so far
};

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  // "CUDA 13.0 (driver 12.8)"
  virtual std::string name() const = 0;
  // Devices this process can use; 0 without a device or a driver (never throws).
  virtual int device_count() const = 0;
  // One line per device: ordinal, model, memory, compute capability.
  virtual std::vector<std::string> describe_devices() const = 0;
  // `bytes` of zero-filled memory on `device`; throws purine::Error when out of memory.
  virtual void* allocate(int device, size_t bytes) = 0;
  virtual void release(int device, void* memory, size_t bytes) noexcept = 0;
  virtual DeviceMemoryStats memory_stats(int device) const = 0;
  // `bytes` of zero-filled page-locked host memory, or null when it cannot be had.
  virtual void* allocate_pinned(size_t bytes) noexcept = 0;
  virtual void release_pinned(void* memory) noexcept = 0;
  // Copies `bytes` between two locations of this process and returns once done.
  virtual void copy(void* to, Location to_at, const void* from, Location from_at, size_t bytes) = 0;
  // A new queue (a stream) on `device`.
  virtual std::shared_ptr<DeviceQueue> make_queue(int device, const std::string& name) = 0;
  // Makes `device` current on the calling thread (each device executor calls it first).
  virtual void use_device(int device) = 0;
  virtual DeviceCounters counters() const = 0;
  // True for an emulated device: its memory is host memory, and an op at one of its locations
  // runs its CPU kernel, put on the location's queue (DeviceQueue::enqueue_host).
  virtual bool kernels_on_host() const { return false; }
};

// The registered runtime (loading the backend on first use), or null without a backend.
DeviceRuntime* device_runtime();
// Called once by the backend while it loads.
void register_device_runtime(DeviceRuntime* runtime);
// Loads the backend once; later calls return at once. Never throws. The library is
// $PURINE_DEVICE_BACKEND where set, else libpurine_cuda.so in libpurine.so's folder.
void load_device_backend();
// Why there is no backend after load_device_backend(), in a user's words: "" with one.
std::string device_backend_problem();
// Puts `runtime` (not owned; null for none) in place of the registered one and returns the one
// it replaced, to be put back the same way: for an emulated device (tests, or a machine without
// a GPU). Only while no tensor at a GPU location and no compiled graph exists.
DeviceRuntime* replace_device_runtime(DeviceRuntime* runtime);
// The runtime, checked to have `device`; otherwise throws purine::Error naming `what` (e.g.
// "tensor memory at rank0:gpu1") and why: no backend (device_backend_problem()), or no such
// device.
DeviceRuntime& require_device(int device, const std::string& what);

}  // namespace purine
