#include "base/device_runtime.hpp"

#include <dlfcn.h>
#include <glog/logging.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>

#include "base/error.hpp"

namespace purine {

namespace {

std::atomic<DeviceRuntime*> registered{nullptr};
std::once_flag loading;
std::string problem;  // written once, inside `loading`

constexpr char kBackendFile[] = "libpurine_cuda.so";

// $PURINE_DEVICE_BACKEND, else the backend's file in the folder of the library holding this code.
std::string backend_path() {
  if (const char* chosen = std::getenv("PURINE_DEVICE_BACKEND")) return chosen;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&load_device_backend), &info) != 0 && info.dli_fname) {
    const std::string self = info.dli_fname;
    const size_t slash = self.rfind('/');
    if (slash != std::string::npos) return self.substr(0, slash + 1) + kBackendFile;
  }
  return kBackendFile;
}

bool is_file(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

void load() {
  const std::string path = backend_path();
  if (!is_file(path)) {
    problem = str("this build has no CUDA backend (no ", path,
                  "; build where cmake finds nvcc, cuDNN and NCCL: it prints 'Purine CUDA "
                  "backend: on')");
    VLOG(1) << problem;
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  // Never closed: its runtime and kernels stay registered for the life of the process.
  if (dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) == nullptr) {
    const char* why = dlerror();
    problem = str("the CUDA backend ", path, " could not be loaded (", why ? why : "unknown error",
                  "); are the CUDA, cuBLAS, cuDNN and NCCL libraries installed?");
    LOG(WARNING) << problem;
    return;
  }
  if (registered.load() == nullptr) {
    problem = str("the CUDA backend ", path, " registered no device runtime");
    LOG(WARNING) << problem;
    return;
  }
  VLOG(1) << "loaded the CUDA backend " << path << " in "
          << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
          << " s";
}

}  // namespace

void load_device_backend() { std::call_once(loading, load); }

std::string device_backend_problem() {
  load_device_backend();
  return registered.load() != nullptr ? "" : problem.empty() ? "no device runtime" : problem;
}

DeviceRuntime* device_runtime() {
  if (DeviceRuntime* runtime = registered.load()) return runtime;
  load_device_backend();
  return registered.load();
}

void register_device_runtime(DeviceRuntime* runtime) {
  DeviceRuntime* none = nullptr;
  CHECK(registered.compare_exchange_strong(none, runtime))
      << "a device runtime is registered already";
}

DeviceRuntime* replace_device_runtime(DeviceRuntime* runtime) {
  load_device_backend();  // first, so that the backend never loads over the replacement
  return registered.exchange(runtime);
}

DeviceRuntime& require_device(int device, const std::string& what) {
  DeviceRuntime* const runtime = device_runtime();
  require(runtime != nullptr, what,
          ": GPU locations need the CUDA backend: ", device_backend_problem());
  const int count = runtime->device_count();
  require(device >= 0 && device < count, what, ": no GPU ", device, " in this process (",
          runtime->name(), " sees ", count, " device", count == 1 ? "" : "s",
          "; `purine devices` lists them)");
  return *runtime;
}

}  // namespace purine
