// The GPU side of operators/cpu/sum_terms.hpp: out[i] = finish(i, ((x_0[i] + x_1[i]) + x_2[i]) +
// ...) for sum, sum_relu and relu_grad with several dy parts, in one pass whatever the number of
// terms. Each thread reads every term of an element before it writes that element, so the output
// may share any term's memory (Aliasing::kInPlace: purine/internal/views.cpp writes a sum over a
// buffer it received, which may be any input), and the order of the additions is the CPU's: the
// same floats. The terms' pointers travel by value in the kernel's parameters, in a list of 4
// for the common sums and of 256 for the rest (2 KB of CUDA's 4 KB of parameters).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "base/error.hpp"
#include "base/tensor.hpp"
#include "operators/cuda/cuda_check.hpp"
#include "operators/cuda/launch.hpp"

namespace purine::cuda {

constexpr int kFewTerms = 4;
constexpr int kMostTerms = 256;

template <int kCapacity>
struct TermList {
  int count = 0;
  const float* x[kCapacity];
};

template <int kCapacity, typename Finish>
__global__ void sum_terms_kernel(int64_t n, const __grid_constant__ TermList<kCapacity> terms,
                                 float* out, Finish finish) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float sum = terms.x[0][i];
    for (int k = 1; k < terms.count; ++k) sum += terms.x[k][i];
    out[i] = finish(i, sum);
  }
}

// inputs[first], inputs[first + 1], ... summed into output, the list built in place (no host
// allocation per launch).
template <int kCapacity, typename Finish>
void launch_term_list(const char* type, cudaStream_t stream,
                      const std::vector<const Tensor*>& inputs, size_t first, Tensor& output,
                      Finish finish) {
  TermList<kCapacity> terms;
  terms.count = static_cast<int>(inputs.size() - first);
  for (int k = 0; k < terms.count; ++k) terms.x[k] = inputs[first + k]->data();
  const int64_t n = output.count();
  sum_terms_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, terms, output.mutable_data(), finish);
  PURINE_CUDA_LAUNCHED(type);
}

// The terms are inputs[first], inputs[first + 1], ... (at least one), of output's count.
template <typename Finish>
void launch_sum_terms(const char* type, cudaStream_t stream,
                      const std::vector<const Tensor*>& inputs, size_t first, Tensor& output,
                      Finish finish) {
  const size_t terms = inputs.size() > first ? inputs.size() - first : 0;
  require(terms >= 1 && terms <= static_cast<size_t>(kMostTerms), type, ": ", terms,
          " terms to add at a GPU; its kernel adds 1 to ", kMostTerms);
  if (output.count() == 0) return;
  if (terms <= static_cast<size_t>(kFewTerms)) {
    launch_term_list<kFewTerms>(type, stream, inputs, first, output, finish);
  } else {
    launch_term_list<kMostTerms>(type, stream, inputs, first, output, finish);
  }
}

}  // namespace purine::cuda
