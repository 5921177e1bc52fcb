// vector_isa() (operators/cpu/vector_isa.hpp): the version of the hand-written vector loops, capped
// by ONEDNN_MAX_CPU_ISA (ctest runs the "[isa]" tests under the AVX2 and SSE4.1 caps too).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "operators/cpu/vector_isa.hpp"

using purine::VectorIsa;

TEST_CASE("vector_isa follows the CPU and ONEDNN_MAX_CPU_ISA's cap", "[isa][determinism]") {
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  const std::string value = cap ? cap : "";
  VectorIsa widest = VectorIsa::kBaseline;
  if (__builtin_cpu_supports("avx2")) widest = VectorIsa::kAvx2;
  if (__builtin_cpu_supports("avx512f")) widest = VectorIsa::kAvx512;
  INFO("ONEDNN_MAX_CPU_ISA=" << value);
  if (value == "SSE41") {
    CHECK(purine::vector_isa() == VectorIsa::kBaseline);
  } else if (value == "AVX2") {
    CHECK(purine::vector_isa() == (widest == VectorIsa::kBaseline ? widest : VectorIsa::kAvx2));
  } else if (value.empty() || value == "ALL") {
    CHECK(purine::vector_isa() == widest);
  }
  CHECK(purine::vector_isa() == purine::vector_isa());  // decided once
}
