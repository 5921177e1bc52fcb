#include "operators/finite.hpp"

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
// rather than calling std::isfinite keeps the loop vectorizable (and immune to -ffast-math).
int64_t count_non_finite(const float* x, int64_t n) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    count += (bits & 0x7f800000u) == 0x7f800000u;
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
