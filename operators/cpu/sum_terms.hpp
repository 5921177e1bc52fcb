// The element-wise sum of several arrays in input order, ((x_0 + x_1) + x_2) + ..., handed to a
// last step per element: out[j] = finish(j, sum_j). sum writes the sum itself, sum_relu its ReLU,
// relu_grad with several dy the ReLU's gradient of their sum: each the same floats as the sum op
// followed by the op it absorbs.
//
// The output may share any input's memory: two terms take one pass in which each out[j] is written
// after both x[.][j] are read; more go through blocks summed in a local buffer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/tensor.hpp"
#include "operators/cpu/threading.hpp"

namespace purine::cpu {

// Elements per block of the sums of three terms or more.
constexpr int64_t kSumTermsBlock = 1024;

// The terms are inputs[first], inputs[first + 1], ..., of output's count of elements.
template <typename Finish>
void sum_terms(const std::vector<const Tensor*>& inputs, size_t first, Tensor& output,
               Finish finish) {
  std::vector<const float*> x;
  for (size_t k = first; k < inputs.size(); ++k) x.push_back(inputs[k]->data());
  const int64_t terms = static_cast<int64_t>(x.size());
  const int64_t n = output.count();
  float* out = output.mutable_data();
  const bool parallel = n * terms > kParallelMinArithmetic;
  if (terms == 1) {
    const float* x0 = x[0];
    parallel_for_simd(n, parallel, [&](int64_t j) { out[j] = finish(j, x0[j]); });
    return;
  }
  if (terms == 2) {
    const float* x0 = x[0];
    const float* x1 = x[1];
    parallel_for_simd(n, parallel, [&](int64_t j) { out[j] = finish(j, x0[j] + x1[j]); });
    return;
  }
  const int64_t blocks = (n + kSumTermsBlock - 1) / kSumTermsBlock;
  parallel_for(blocks, parallel, [&](int64_t b) {
    const int64_t begin = b * kSumTermsBlock;
    const int64_t len = std::min(kSumTermsBlock, n - begin);
    float acc[kSumTermsBlock];
    const float* x0 = x[0] + begin;
    for (int64_t j = 0; j < len; ++j) acc[j] = x0[j];
    for (int64_t k = 1; k < terms; ++k) {
      const float* xk = x[k] + begin;
      for (int64_t j = 0; j < len; ++j) acc[j] += xk[j];
    }
    for (int64_t j = 0; j < len; ++j) out[begin + j] = finish(begin + j, acc[j]);
  });
}

}  // namespace purine::cpu
