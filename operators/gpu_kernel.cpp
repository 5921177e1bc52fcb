#include "operators/gpu_kernel.hpp"

#include <glog/logging.h>

#include <map>

namespace purine {

namespace {
struct Entry {
  GpuKernel kernel;
  GpuPrepare prepare;
};
std::map<std::string, Entry>& kernels() {
  static std::map<std::string, Entry> table;
  return table;
}
}  // namespace

bool GpuKernels::add(const std::string& type, GpuKernel kernel, GpuPrepare prepare) {
  CHECK(kernels().emplace(type, Entry{kernel, prepare}).second)
      << "GPU kernel of '" << type << "' registered twice";
  return true;
}

GpuKernel GpuKernels::find(const std::string& type) {
  auto it = kernels().find(type);
  return it == kernels().end() ? nullptr : it->second.kernel;
}

GpuPrepare GpuKernels::find_prepare(const std::string& type) {
  auto it = kernels().find(type);
  return it == kernels().end() ? nullptr : it->second.prepare;
}

std::vector<std::string> GpuKernels::types() {
  std::vector<std::string> names;
  for (const auto& entry : kernels()) names.push_back(entry.first);
  return names;
}

}  // namespace purine
