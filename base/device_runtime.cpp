#include "base/device_runtime.hpp"

#include <glog/logging.h>

#include "base/error.hpp"

namespace purine {

namespace {
DeviceRuntime* registered = nullptr;
}  // namespace

DeviceRuntime* device_runtime() { return registered; }

void register_device_runtime(DeviceRuntime* runtime) {
  CHECK(registered == nullptr) << "a device runtime is registered already";
  registered = runtime;
}

DeviceRuntime* replace_device_runtime(DeviceRuntime* runtime) {
  DeviceRuntime* const previous = registered;
  registered = runtime;
  return previous;
}

DeviceRuntime& require_device(int device, const std::string& what) {
  require(registered != nullptr, what,
          ": GPU locations need the CUDA backend, which this build does not have (build where "
          "nvcc, cuDNN and NCCL are found; cmake prints 'Purine CUDA backend: on')");
  const int count = registered->device_count();
  require(device >= 0 && device < count, what, ": no GPU ", device, " in this process (",
          registered->name(), " sees ", count, " device", count == 1 ? "" : "s",
          "; `purine devices` lists them)");
  return *registered;
}

}  // namespace purine
