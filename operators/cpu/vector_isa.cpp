#include "operators/cpu/vector_isa.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

namespace purine {

namespace {

VectorIsa cap_from_environment() {
  const char* value = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (value == nullptr) return VectorIsa::kAvx512;
  std::string isa(value);
  std::transform(isa.begin(), isa.end(), isa.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
  if (isa.empty() || isa == "ALL" || isa.rfind("AVX512", 0) == 0 || isa.rfind("AVX10", 0) == 0)
    return VectorIsa::kAvx512;
  if (isa.rfind("AVX2", 0) == 0) return VectorIsa::kAvx2;
  return VectorIsa::kBaseline;
}

VectorIsa detect() {
  const VectorIsa cap = cap_from_environment();
  if (cap == VectorIsa::kAvx512 && __builtin_cpu_supports("avx512f")) return VectorIsa::kAvx512;
  if (cap != VectorIsa::kBaseline && __builtin_cpu_supports("avx2")) return VectorIsa::kAvx2;
  return VectorIsa::kBaseline;
}

}  // namespace

VectorIsa vector_isa() {
  static const VectorIsa isa = detect();
  return isa;
}

bool avx2_fma_kernels_run() {
  static const bool run = vector_isa() != VectorIsa::kBaseline && __builtin_cpu_supports("fma");
  return run;
}

}  // namespace purine
