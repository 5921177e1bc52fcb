#include "operators/gpu_kernel.hpp"

#include <glog/logging.h>

#include <atomic>
#include <map>

#include "base/device_runtime.hpp"

namespace purine {

namespace {
std::atomic<GpuMath> math{GpuMath::kFp32};
struct Entry {
  GpuKernel kernel;
  GpuPrepare prepare;
};
std::map<std::string, Entry>& kernels() {
  static std::map<std::string, Entry> table;
  return table;
}
}  // namespace

void set_gpu_math(GpuMath m) { math.store(m); }
GpuMath gpu_math() { return math.load(); }

bool GpuKernels::add(const std::string& type, GpuKernel kernel, GpuPrepare prepare) {
  CHECK(kernels().emplace(type, Entry{kernel, prepare}).second)
      << "GPU kernel of '" << type << "' registered twice";
  return true;
}

// Lookups load the backend first (base/device_runtime.hpp); add() is called while it loads.
GpuKernel GpuKernels::find(const std::string& type) {
  load_device_backend();
  auto it = kernels().find(type);
  return it == kernels().end() ? nullptr : it->second.kernel;
}

GpuPrepare GpuKernels::find_prepare(const std::string& type) {
  load_device_backend();
  auto it = kernels().find(type);
  return it == kernels().end() ? nullptr : it->second.prepare;
}

std::vector<std::string> GpuKernels::types() {
  load_device_backend();
  std::vector<std::string> names;
  for (const auto& entry : kernels()) names.push_back(entry.first);
  return names;
}

}  // namespace purine
