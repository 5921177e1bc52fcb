// What the multi-weight update kernels (sgd_update.cu, adam_update.cu) share: an op of K weights
// (kIn input and kOut output tensors per weight, then its scalars) updated by one launch per
// kMaxWeights weights. The weights' elements are laid end to end and each block takes one fixed
// range of them, crossing from one weight to the next as it goes, so small weights (biases) do
// not each cost a launch. The per-element formula is the caller's; its results do not depend on
// how the weights are batched.
#pragma once

#include <algorithm>
#include <vector>

#include "base/tensor.hpp"
#include "operators/cuda/launch.hpp"

namespace purine::cuda {

// The weights of one launch, passed by value (within CUDA's 4 KB of kernel parameters).
constexpr int kMaxWeights = 24;
template <int kIn, int kOut>
struct WeightList {
  int count = 0;
  int64_t end[kMaxWeights];  // elements of weights 0..k, laid end to end
  const float* in[kIn][kMaxWeights];
  float* out[kOut][kMaxWeights];
};

// Calls step(k, j) for element j of weight k, for every element of this block's range of
// `per_block` elements.
template <int kIn, int kOut, class Step>
__device__ void for_each_weight_element(const WeightList<kIn, kOut>& s, int64_t per_block,
                                        Step step) {
  const int64_t begin = blockIdx.x * per_block;
  const int64_t end = min(begin + per_block, s.end[s.count - 1]);
  for (int k = 0; k < s.count; ++k) {
    const int64_t start = k == 0 ? 0 : s.end[k - 1];
    const int64_t from = max(begin, start), to = min(end, s.end[k]);
    for (int64_t i = from + threadIdx.x; i < to; i += blockDim.x) step(k, i - start);
  }
}

// Cuts the op's weights (inputs: kIn per weight, then `scalars`; outputs: kOut per weight) into
// lists of at most kMaxWeights non-empty ones and calls launch(list, blocks, per_block) for each.
template <int kIn, int kOut, class Launch>
void launch_weight_lists(const std::vector<const Tensor*>& inputs,
                         const std::vector<Tensor*>& outputs, size_t scalars, Launch launch) {
  const size_t weights = (inputs.size() - scalars) / kIn;
  for (size_t first = 0; first < weights; first += kMaxWeights) {
    WeightList<kIn, kOut> s;
    int64_t total = 0;
    for (size_t k = first; k < std::min(weights, first + kMaxWeights); ++k) {
      const int64_t n = inputs[kIn * k]->count();
      if (n == 0) continue;
      total += n;
      s.end[s.count] = total;
      for (int r = 0; r < kIn; ++r) s.in[r][s.count] = inputs[kIn * k + r]->data();
      for (int r = 0; r < kOut; ++r) s.out[r][s.count] = outputs[kOut * k + r]->mutable_data();
      ++s.count;
    }
    if (total == 0) continue;
    const int blocks = blocks_for(total);
    launch(s, blocks, (total + blocks - 1) / blocks);
  }
}

}  // namespace purine::cuda
