// GPU kernel of operators/sgd_update.hpp: the CPU kernel's formula per element; the learning
// rate is read on the device (a scalar tensor the trainer writes between runs). The op's
// weights are updated by one launch (in batches of kMaxWeights): their elements laid end to end,
// each block takes a fixed range of them, crossing from one weight to the next as it goes.
#include <algorithm>

#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/elementwise_kernels.cuh"
#include "operators/gpu_kernel.hpp"
#include "operators/sgd_update.hpp"

namespace purine::cuda {

namespace {

// What one launch updates, passed by value (within CUDA's 4 KB of kernel parameters).
constexpr int kMaxWeights = 24;
struct Weights {
  int count = 0;
  int64_t end[kMaxWeights];  // elements of weights 0..k, laid end to end
  const float* w[kMaxWeights];
  const float* g[kMaxWeights];
  const float* h[kMaxWeights];
  float* new_w[kMaxWeights];
  float* new_h[kMaxWeights];
};

__global__ void sgd_steps(Weights s, int64_t per_block, const float* lr, float momentum,
                          float decay) {
  const float rate = *lr;
  const int64_t begin = blockIdx.x * per_block;
  const int64_t end = min(begin + per_block, s.end[s.count - 1]);
  for (int k = 0; k < s.count; ++k) {
    const int64_t start = k == 0 ? 0 : s.end[k - 1];
    const int64_t from = max(begin, start), to = min(end, s.end[k]);
    for (int64_t i = from + threadIdx.x; i < to; i += blockDim.x) {
      const int64_t j = i - start;
      const float wj = s.w[k][j];
      const float hj = momentum * s.h[k][j] + rate * (s.g[k][j] + decay * wj);
      s.new_h[k][j] = hj;
      s.new_w[k][j] = wj - hj;
    }
  }
}

void sgd_update(const Operator& op, const std::vector<const Tensor*>& inputs,
                const std::vector<Tensor*>& outputs, OpContext& context) {
  require_contiguous_gpu("sgd_update", inputs, outputs);
  const float momentum = static_cast<float>(op.attrs().get_float("momentum", 0.0));
  const float decay = static_cast<float>(op.attrs().get_float("weight_decay", 0.0));
  const float* lr = inputs.back()->data();
  const size_t weights = inputs.size() / 3;
  for (size_t first = 0; first < weights; first += kMaxWeights) {
    Weights s;
    int64_t total = 0;
    for (size_t k = first; k < std::min(weights, first + kMaxWeights); ++k) {
      if (inputs[3 * k]->count() == 0) continue;
      total += inputs[3 * k]->count();
      s.end[s.count] = total;
      s.w[s.count] = inputs[3 * k]->data();
      s.g[s.count] = inputs[3 * k + 1]->data();
      s.h[s.count] = inputs[3 * k + 2]->data();
      s.new_w[s.count] = outputs[2 * k]->mutable_data();
      s.new_h[s.count] = outputs[2 * k + 1]->mutable_data();
      ++s.count;
    }
    if (total == 0) continue;
    const int blocks = blocks_for(total);
    const int64_t per_block = (total + blocks - 1) / blocks;
    sgd_steps<<<blocks, kThreads, 0, stream_of(context).stream()>>>(s, per_block, lr, momentum,
                                                                    decay);
    PURINE_CUDA_LAUNCHED("sgd_update");
  }
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(SgdUpdateOp, sgd_update);

}  // namespace purine::cuda
