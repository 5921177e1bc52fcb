#include "dispatcher/emulated_devices.hpp"

#include <cstdlib>
#include <cstring>

#include "base/error.hpp"
#include "dispatcher/emulated_queue.hpp"
#include "dispatcher/internal/mutex.hpp"

namespace purine::dispatch {

namespace {

// Zero-filled host memory aligned as the CPU kernels want it, or null.
void* zeroed(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* memory = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (memory) std::memset(memory, 0, rounded);
  return memory;
}

}  // namespace

struct EmulatedDevices::State {
  explicit State(int devices) : queues(devices), memory(devices) {}
  // The live queues of `device` (the dead ones forgotten).
  std::vector<std::shared_ptr<EmulatedQueue>> live_queues(int device) EXCLUDES(mu) {
    MutexLock lock(&mu);
    std::vector<std::shared_ptr<EmulatedQueue>> live;
    std::vector<std::weak_ptr<EmulatedQueue>>& all = queues[device];
    size_t kept = 0;
    for (std::weak_ptr<EmulatedQueue>& q : all) {
      if (std::shared_ptr<EmulatedQueue> queue = q.lock()) {
        live.push_back(std::move(queue));
        all[kept++] = q;
      }
    }
    all.resize(kept);
    return live;
  }

  Mutex mu;
  std::vector<std::vector<std::weak_ptr<EmulatedQueue>>> queues GUARDED_BY(mu);  // by device
  std::vector<DeviceMemoryStats> memory GUARDED_BY(mu);                          // by device
  DeviceCounters counters GUARDED_BY(mu);
};

EmulatedDevices::EmulatedDevices(int devices)
    : devices_(devices), state_(std::make_unique<State>(devices)) {
  require(devices >= 0, "EmulatedDevices: the number of devices must not be negative, got ",
          devices);
}

EmulatedDevices::~EmulatedDevices() = default;

void EmulatedDevices::check_device(int device, const std::string& what) const {
  require(device >= 0 && device < devices_, what, ": no GPU ", device, " among the ", devices_,
          " emulated device", devices_ == 1 ? "" : "s");
}

std::string EmulatedDevices::name() const {
  return "emulated devices (host memory; CPU kernels on one host thread per stream)";
}

std::vector<std::string> EmulatedDevices::describe_devices() const {
  std::vector<std::string> lines;
  for (int d = 0; d < devices_; ++d) lines.push_back(str("gpu", d, ": emulated on the host"));
  return lines;
}

void* EmulatedDevices::allocate(int device, size_t bytes) {
  check_device(device, "emulated GPU memory");
  void* memory = zeroed(bytes);
  require(memory != nullptr, "emulated gpu", device, ": out of host memory for ", bytes, " bytes");
  MutexLock lock(&state_->mu);
  ++state_->counters.allocations;
  DeviceMemoryStats& m = state_->memory[device];
  m.in_use += bytes;
  m.peak_in_use = std::max(m.peak_in_use, m.in_use);
  ++m.driver_allocations;
  return memory;
}

void EmulatedDevices::release(int device, void* memory, size_t bytes) noexcept {
  std::free(memory);
  MutexLock lock(&state_->mu);
  state_->memory[device].in_use -= bytes;
}

DeviceMemoryStats EmulatedDevices::memory_stats(int device) const {
  check_device(device, "emulated GPU memory statistics");
  MutexLock lock(&state_->mu);
  return state_->memory[device];
}

void* EmulatedDevices::allocate_pinned(size_t bytes) noexcept {
  {
    MutexLock lock(&state_->mu);
    ++state_->counters.allocations;
  }
  return zeroed(bytes);
}

void EmulatedDevices::release_pinned(void* memory) noexcept { std::free(memory); }

void EmulatedDevices::copy(void* to, Location to_at, const void* from, Location from_at,
                           size_t bytes) {
  // A kernel's own copy (a CPU kernel filling its output runs on a queue's thread) is the
  // device's work, in its queue's order already.
  if (EmulatedQueue::on_queue_thread()) {
    std::memcpy(to, from, bytes);
    return;
  }
  // As cudaMemcpy + cudaDeviceSynchronize: everything queued on the devices involved first.
  for (const Location& at : {to_at, from_at})
    if (!at.is_cpu())
      for (const std::shared_ptr<EmulatedQueue>& queue : state_->live_queues(at.device))
        queue->drain();
  std::memcpy(to, from, bytes);
  MutexLock lock(&state_->mu);
  ++state_->counters.synchronizations;
  if (to_at.is_cpu() && !from_at.is_cpu()) state_->counters.device_to_host_bytes += bytes;
  if (!to_at.is_cpu() && from_at.is_cpu()) state_->counters.host_to_device_bytes += bytes;
}

std::shared_ptr<DeviceQueue> EmulatedDevices::make_queue(int device, const std::string& name) {
  check_device(device, "emulated stream " + name);
  auto queue = std::make_shared<EmulatedQueue>(name);
  MutexLock lock(&state_->mu);
  state_->queues[device].push_back(queue);
  return queue;
}

DeviceCounters EmulatedDevices::counters() const {
  MutexLock lock(&state_->mu);
  return state_->counters;
}

ScopedEmulatedDevices::ScopedEmulatedDevices(int devices)
    : devices_(std::make_unique<EmulatedDevices>(devices)),
      replaced_(replace_device_runtime(devices_.get())) {}

ScopedEmulatedDevices::~ScopedEmulatedDevices() { replace_device_runtime(replaced_); }

}  // namespace purine::dispatch
