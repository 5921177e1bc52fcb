// Which version of the hand-written CPU loops compiled for several vector ISAs (the build targets
// plain x86-64; finite.cpp and lrn.cpp add AVX2 and AVX-512 versions) a call runs: the widest the
// CPU has, capped by ONEDNN_MAX_CPU_ISA as oneDNN's own kernels are, so that one environment
// variable caps both (the test suite reruns tests under AVX2 and SSE4.1 caps).
#pragma once

#include <utility>

namespace purine {

enum class VectorIsa { kBaseline, kAvx2, kAvx512 };

// Decided at the first call: ONEDNN_MAX_CPU_ISA unset, ALL or naming an AVX-512 (or later) ISA
// caps nothing; AVX2... caps at AVX2; anything else (SSE41, AVX) at the baseline.
VectorIsa vector_isa();

// Whether the hand-written AVX2 kernels with fused multiply-adds (the shifted-rows weight
// gradient, Winograd's convolutions) may run: vector_isa() is AVX2 or wider and the CPU has FMA.
bool avx2_fma_kernels_run();

// Calls the version of a loop for vector_isa() (its AVX-512, AVX2 or baseline build) with `args`.
template <class Avx512, class Avx2, class Baseline, class... Args>
auto call_for_vector_isa(Avx512 avx512, Avx2 avx2, Baseline baseline, Args&&... args) {
  switch (vector_isa()) {
    case VectorIsa::kAvx512:
      return avx512(std::forward<Args>(args)...);
    case VectorIsa::kAvx2:
      return avx2(std::forward<Args>(args)...);
    case VectorIsa::kBaseline:
      break;
  }
  return baseline(std::forward<Args>(args)...);
}

}  // namespace purine
