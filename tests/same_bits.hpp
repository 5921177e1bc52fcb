// Bit-for-bit equality of two tensors, element by element in [N, C, H, W] order (through
// values(), so a tensor in channel blocks compares as its plain form).
#pragma once

#include <cstring>
#include <vector>

#include "base/tensor.hpp"

namespace purine::testing {

inline bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.values(), y = b.values();
  return a.shape() == b.shape() && std::memcmp(x.data(), y.data(), sizeof(float) * x.size()) == 0;
}

}  // namespace purine::testing
