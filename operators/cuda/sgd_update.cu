// GPU kernel of operators/sgd_update.hpp: the CPU kernel's formula per element
// (operators/formulas.hpp); the learning
// rate is read on the device (a scalar tensor the trainer writes between runs). The op's
// weights are updated by one launch per kMaxWeights of them (weight_list.cuh).
#include "base/error.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/elementwise_kernels.cuh"
#include "operators/cuda/weight_list.cuh"
#include "operators/formulas.hpp"
#include "operators/gpu_kernel.hpp"
#include "operators/sgd_update.hpp"

namespace purine::cuda {

namespace {

// Per weight: in = (w, g, h), out = (new_w, new_h).
using SgdWeights = WeightList<3, 2>;

__global__ void sgd_steps(SgdWeights s, int64_t per_block, const float* lr, float momentum,
                          float decay) {
  const formula::SgdStep step{*lr, momentum, decay};
  for_each_weight_element(s, per_block, [&](int k, int64_t j) {
    const float wj = s.in[0][k][j];
    const float hj = step.history(wj, s.in[1][k][j], s.in[2][k][j]);
    s.out[1][k][j] = hj;
    s.out[0][k][j] = step.weight(wj, hj);
  });
}

void sgd_update(const Operator& op, const std::vector<const Tensor*>& inputs,
                const std::vector<Tensor*>& outputs, OpContext& context) {
  const auto& sgd = static_cast<const SgdUpdateOp&>(op);
  require(!sgd.counts_non_finite(),
          "sgd_update: count_non_finite has no GPU kernel (count with count_non_finite)");
  const float momentum = sgd.momentum(), decay = sgd.weight_decay();
  const float* lr = inputs.back()->data();
  const cudaStream_t stream = stream_of(context).stream();
  launch_weight_lists<3, 2>(
      inputs, outputs, 1, [&](const SgdWeights& s, int blocks, int64_t per_block) {
        sgd_steps<<<blocks, kThreads, 0, stream>>>(s, per_block, lr, momentum, decay);
        PURINE_CUDA_LAUNCHED("sgd_update");
      });
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(SgdUpdateOp, sgd_update);

}  // namespace purine::cuda
