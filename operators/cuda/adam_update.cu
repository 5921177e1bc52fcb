// GPU kernel of operators/adam_update.hpp: the CPU kernel's formula per element
// (operators/formulas.hpp); the learning rate and step are read on the device (scalar tensors the
// trainer writes between runs). The op's weights are updated by one launch per kMaxWeights of
// them (weight_list.cuh).
#include "base/error.hpp"
#include "operators/adam_update.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/elementwise_kernels.cuh"
#include "operators/cuda/weight_list.cuh"
#include "operators/formulas.hpp"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

// Per weight: in = (w, g, m, v), out = (new_w, new_m, new_v).
using AdamWeights = WeightList<4, 3>;

__global__ void adam_steps(AdamWeights s, int64_t per_block, const float* lr, const float* step,
                           AdamUpdateOp::Hyper h) {
  const formula::AdamStep a(h.beta1, h.beta2, h.one_minus_beta1, h.one_minus_beta2, h.eps,
                            h.weight_decay, h.decoupled, *lr, *step);
  for_each_weight_element(s, per_block, [&](int k, int64_t j) {
    const float wj = s.in[0][k][j];
    const float gj = a.gradient(wj, s.in[1][k][j]);
    const float mj = a.first_moment(s.in[2][k][j], gj);
    const float vj = a.second_moment(s.in[3][k][j], gj);
    s.out[1][k][j] = mj;
    s.out[2][k][j] = vj;
    s.out[0][k][j] = a.weight(wj, mj, vj);
  });
}

void adam_update(const Operator& op, const std::vector<const Tensor*>& inputs,
                 const std::vector<Tensor*>& outputs, OpContext& context) {
  const auto& hyper = static_cast<const AdamUpdateOp&>(op).hyper();
  require(!hyper.count_non_finite,
          "adam_update: count_non_finite has no GPU kernel (count with count_non_finite)");
  const float* lr = inputs[inputs.size() - 2]->data();
  const float* step = inputs.back()->data();
  const cudaStream_t stream = stream_of(context).stream();
  launch_weight_lists<4, 3>(
      inputs, outputs, 2, [&](const AdamWeights& s, int blocks, int64_t per_block) {
        adam_steps<<<blocks, kThreads, 0, stream>>>(s, per_block, lr, step, hyper);
        PURINE_CUDA_LAUNCHED("adam_update");
      });
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(AdamUpdateOp, adam_update);

}  // namespace purine::cuda
