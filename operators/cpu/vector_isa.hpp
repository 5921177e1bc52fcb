// Which version of the hand-written CPU loops compiled for several vector ISAs (the build targets
// plain x86-64; finite.cpp and lrn.cpp add AVX2 and AVX-512 versions) a call runs: the widest the
// CPU has, capped by ONEDNN_MAX_CPU_ISA as oneDNN's own kernels are, so that one environment
// variable caps both (the test suite reruns tests under AVX2 and SSE4.1 caps).
#pragma once

namespace purine {

enum class VectorIsa { kBaseline, kAvx2, kAvx512 };

// Decided at the first call: ONEDNN_MAX_CPU_ISA unset, ALL or naming an AVX-512 (or later) ISA
// caps nothing; AVX2... caps at AVX2; anything else (SSE41, AVX) at the baseline.
VectorIsa vector_isa();

}  // namespace purine
