// Host tensors of random values for the GPU kernels' tests: uniform floats, or small integers
// and zeros of both signs (many ties, for the tie rules of the max kernels).
#pragma once

#include <random>

#include "base/tensor.hpp"

namespace purine::testing {

inline Tensor random_tensor(const Shape& shape, std::mt19937& gen, float lo = -2.0f,
                            float hi = 2.0f) {
  Tensor t(shape);
  std::uniform_real_distribution<float> uniform(lo, hi);
  float* p = t.mutable_data();
  for (int64_t i = 0; i < t.count(); ++i) p[i] = uniform(gen);
  return t;
}

inline Tensor tied_tensor(const Shape& shape, std::mt19937& gen) {
  Tensor t(shape);
  std::uniform_int_distribution<int> pick(-1, 2);
  float* p = t.mutable_data();
  for (int64_t i = 0; i < t.count(); ++i) {
    const int v = pick(gen);
    p[i] = v == -1 ? -0.0f : float(v);
  }
  return t;
}

}  // namespace purine::testing
