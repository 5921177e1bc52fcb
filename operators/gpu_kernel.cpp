#include "operators/gpu_kernel.hpp"

#include <glog/logging.h>

#include <map>

namespace purine {

namespace {
std::map<std::string, GpuKernel>& kernels() {
  static std::map<std::string, GpuKernel> table;
  return table;
}
}  // namespace

bool GpuKernels::add(const std::string& type, GpuKernel kernel) {
  CHECK(kernels().emplace(type, kernel).second) << "GPU kernel of '" << type << "' registered twice";
  return true;
}

GpuKernel GpuKernels::find(const std::string& type) {
  auto it = kernels().find(type);
  return it == kernels().end() ? nullptr : it->second;
}

std::vector<std::string> GpuKernels::types() {
  std::vector<std::string> names;
  for (const auto& entry : kernels()) names.push_back(entry.first);
  return names;
}

}  // namespace purine
