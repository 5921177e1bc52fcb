// GPU kernels of operators/bias.hpp. bias_grad sums each channel over samples and positions in a
// fixed order (one thread per channel), so its result does not depend on the launch.
#include "operators/bias.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/elementwise_kernels.cuh"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

__global__ void add_bias(int64_t count, int64_t channels, int64_t inner, const float* x,
                         const float* b, float* y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = x[i] + b[i / inner % channels];
}

__global__ void sum_channels(int64_t samples, int64_t channels, int64_t inner, const float* dy,
                             float* db) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= channels) return;
  float total = 0.0f;
  for (int64_t n = 0; n < samples; ++n) {
    const float* plane = dy + (n * channels + c) * inner;
    for (int64_t j = 0; j < inner; ++j) total += plane[j];
  }
  db[c] = total;
}

void bias(const Operator&, const std::vector<const Tensor*>& inputs,
          const std::vector<Tensor*>& outputs, OpContext& context) {
  require_contiguous_gpu(BiasOp::kType, inputs, outputs);
  const Shape& shape = inputs[0]->shape();
  const int64_t count = shape.count();
  if (count == 0) return;
  add_bias<<<blocks_for(count), kThreads, 0, stream_of(context).stream()>>>(
      count, shape[1], shape.count_from(2), inputs[0]->data(), inputs[1]->data(),
      outputs[0]->mutable_data());
  PURINE_CUDA_LAUNCHED(BiasOp::kType);
}

void bias_grad(const Operator&, const std::vector<const Tensor*>& inputs,
               const std::vector<Tensor*>& outputs, OpContext& context) {
  require_contiguous_gpu(BiasGradOp::kType, inputs, outputs);
  const Shape& shape = inputs[0]->shape();
  if (shape[1] == 0) return;
  sum_channels<<<blocks_for(shape[1]), kThreads, 0, stream_of(context).stream()>>>(
      shape[0], shape[1], shape.count_from(2), inputs[0]->data(), outputs[0]->mutable_data());
  PURINE_CUDA_LAUNCHED(BiasGradOp::kType);
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(BiasOp, bias);
PURINE_REGISTER_GPU_KERNEL(BiasGradOp, bias_grad);

}  // namespace purine::cuda
