#include "operators/finite.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/error.hpp"
#include "operators/registry.hpp"

namespace purine {

std::vector<Shape> CountNonFiniteOp::output_shapes(const std::vector<Shape>&) const {
  return {Shape{}};
}

namespace {

// NaN and the infinities are the floats whose exponent bits are all ones. Testing the bits
// rather than calling std::isfinite keeps the loop vectorizable (and immune to -ffast-math); a
// 32-bit count per chunk vectorizes to four (or more) lanes where a 64-bit one stayed scalar
// (the trainer counts every weight each iteration: mlp's 235,000 took 67 us, 11% of a CPU step);
// compiled for AVX-512 and AVX2 too, picked at load time by the CPU (the build targets plain
// x86-64): about 3.5x fewer microseconds than the 64-bit loop on an AVX-512 machine.
__attribute__((target_clones("avx512f", "avx2", "default"))) int64_t count_non_finite(
    const float* x, int64_t n) {
  constexpr int64_t kChunk = int64_t{1} << 30;  // the 32-bit count cannot overflow
  int64_t count = 0;
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t end = std::min(n, start + kChunk);
    uint32_t chunk = 0;
    for (int64_t i = start; i < end; ++i) {
      uint32_t bits;
      std::memcpy(&bits, x + i, sizeof bits);
      chunk += (bits & 0x7f800000u) == 0x7f800000u;
    }
    count += chunk;
  }
  return count;
}

}  // namespace

void CountNonFiniteOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                   const std::vector<Tensor*>& outputs, OpContext&) {
  int64_t count = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    require(inputs[i]->is_contiguous(), kType, ": input ", i,
            " is a strided view; this kernel needs contiguous tensors");
    count += count_non_finite(inputs[i]->data(), inputs[i]->count());
  }
  *outputs[0]->mutable_data() = static_cast<float>(count);
}

PURINE_REGISTER_OPERATOR(CountNonFiniteOp);

}  // namespace purine
