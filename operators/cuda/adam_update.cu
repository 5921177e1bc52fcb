// GPU kernel of operators/adam_update.hpp: the CPU kernel's formula per element; the learning
// rate and step are read on the device (scalar tensors the trainer writes between runs).
#include "operators/adam_update.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/elementwise_kernels.cuh"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

__global__ void adam_step(int64_t n, const float* w, const float* g, const float* m, const float* v,
                          const float* lr, const float* step, AdamUpdateOp::Hyper h, float* new_w,
                          float* new_m, float* new_v) {
  const float rate = *lr;
  const double t = *step;
  const float step_size = static_cast<float>(rate / (1.0 - pow(double(h.beta1), t)));
  const float correction2 = static_cast<float>(sqrt(1.0 - pow(double(h.beta2), t)));
  const float shrink = h.decoupled ? 1.0f - rate * h.weight_decay : 1.0f;
  const float l2 = h.decoupled ? 0.0f : h.weight_decay;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float gi = g[i] + l2 * w[i];
    const float mi = h.beta1 * m[i] + h.one_minus_beta1 * gi;
    const float vi = h.beta2 * v[i] + h.one_minus_beta2 * gi * gi;
    new_m[i] = mi;
    new_v[i] = vi;
    new_w[i] = w[i] * shrink - step_size * mi / (sqrtf(vi) / correction2 + h.eps);
  }
}

void adam_update(const Operator& op, const std::vector<const Tensor*>& inputs,
                 const std::vector<Tensor*>& outputs, OpContext& context) {
  require_contiguous_gpu("adam_update", inputs, outputs);
  const int64_t n = inputs[0]->count();
  if (n == 0) return;
  const auto& hyper = static_cast<const AdamUpdateOp&>(op).hyper();
  adam_step<<<blocks_for(n), kThreads, 0, stream_of(context).stream()>>>(
      n, inputs[0]->data(), inputs[1]->data(), inputs[2]->data(), inputs[3]->data(),
      inputs[4]->data(), inputs[5]->data(), hyper, outputs[0]->mutable_data(),
      outputs[1]->mutable_data(), outputs[2]->mutable_data());
  PURINE_CUDA_LAUNCHED("adam_update");
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(AdamUpdateOp, adam_update);

}  // namespace purine::cuda
