// GPU kernel of operators/sgd_update.hpp: the CPU kernel's formula per element; the learning
// rate is read on the device (a scalar tensor the trainer writes between runs).
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/elementwise_kernels.cuh"
#include "operators/gpu_kernel.hpp"
#include "operators/sgd_update.hpp"

namespace purine::cuda {

namespace {

__global__ void sgd_step(int64_t n, const float* w, const float* g, const float* h,
                         const float* lr, float momentum, float decay, float* new_w,
                         float* new_h) {
  const float rate = *lr;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float wi = w[i];
    const float hi = momentum * h[i] + rate * (g[i] + decay * wi);
    new_h[i] = hi;
    new_w[i] = wi - hi;
  }
}

void sgd_update(const Operator& op, const std::vector<const Tensor*>& inputs,
                const std::vector<Tensor*>& outputs, OpContext& context) {
  require_contiguous_gpu("sgd_update", inputs, outputs);
  const int64_t n = inputs[0]->count();
  if (n == 0) return;
  const float momentum = static_cast<float>(op.attrs().get_float("momentum", 0.0));
  const float decay = static_cast<float>(op.attrs().get_float("weight_decay", 0.0));
  sgd_step<<<blocks_for(n), kThreads, 0, stream_of(context).stream()>>>(
      n, inputs[0]->data(), inputs[1]->data(), inputs[2]->data(), inputs[3]->data(), momentum,
      decay, outputs[0]->mutable_data(), outputs[1]->mutable_data());
  PURINE_CUDA_LAUNCHED("sgd_update");
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(SgdUpdateOp, sgd_update);

}  // namespace purine::cuda
