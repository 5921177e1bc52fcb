// EmulatedDevices: a DeviceRuntime (base/device_runtime.hpp) whose GPUs are emulated on the host,
// so that everything the host does for a GPU location (graphs compiled for it, device executors
// and their queues and events, copies to and from it, a trainer's loop) runs and can be counted
// on a machine without a GPU. Device memory is host memory; each queue is an EmulatedQueue
// (one host thread); an op at a device location runs its CPU kernel on its location's queue
// (kernels_on_host()), so results equal the CPU's. copy() behaves as the CUDA backend's: it
// waits for every queue of the device first (a device synchronize), and is counted; but called
// by a kernel on a queue's thread (a CPU kernel filling its output) it is the device's own work,
// neither a synchronization nor counted.
//
// Install one with ScopedEmulatedDevices (below) before building graphs at its locations.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/device_runtime.hpp"

namespace purine::dispatch {

class EmulatedDevices : public DeviceRuntime {
 public:
  explicit EmulatedDevices(int devices);
  ~EmulatedDevices() override;
  EmulatedDevices(const EmulatedDevices&) = delete;
  EmulatedDevices& operator=(const EmulatedDevices&) = delete;

  std::string name() const override;
  int device_count() const override { return devices_; }
  std::vector<std::string> describe_devices() const override;
  void* allocate(int device, size_t bytes) override;
  void release(int device, void* memory, size_t bytes) noexcept override;
  DeviceMemoryStats memory_stats(int device) const override;
  void* allocate_pinned(size_t bytes) noexcept override;
  void release_pinned(void* memory) noexcept override;
  void copy(void* to, Location to_at, const void* from, Location from_at, size_t bytes) override;
  std::shared_ptr<DeviceQueue> make_queue(int device, const std::string& name) override;
  void use_device(int device) override {}
  DeviceCounters counters() const override;
  bool kernels_on_host() const override { return true; }

 private:
  // Throws purine::Error naming `what` unless 0 <= device < device_count().
  void check_device(int device, const std::string& what) const;

  const int devices_;
  struct State;  // queues, memory statistics and counters, under one mutex
  std::unique_ptr<State> state_;
};

// Installs EmulatedDevices(devices) as the device runtime for its lifetime, then puts back the
// one it replaced. Create it before any graph or tensor at a GPU location and destroy it after.
class ScopedEmulatedDevices {
 public:
  explicit ScopedEmulatedDevices(int devices = 1);
  ~ScopedEmulatedDevices();
  ScopedEmulatedDevices(const ScopedEmulatedDevices&) = delete;
  ScopedEmulatedDevices& operator=(const ScopedEmulatedDevices&) = delete;
  EmulatedDevices& devices() { return *devices_; }

 private:
  std::unique_ptr<EmulatedDevices> devices_;
  DeviceRuntime* replaced_;
};

}  // namespace purine::dispatch
