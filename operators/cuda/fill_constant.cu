// GPU kernel of FillConstantOp (operators/fill.hpp): every element set to `value` on the op's
// stream. It runs in every training step (the seed of the loss gradient), so it is a kernel of its
// own, unlike the random fillers (fill.cpp), which run at initialization: a recorded CUDA graph
// must not read host memory that was staged when it was recorded.
#include "base/error.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/elementwise_kernels.cuh"
#include "operators/fill.hpp"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

__global__ void set_all(int64_t n, float value, float* y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = value;
}

void fill_constant(const Operator& op, const std::vector<const Tensor*>&,
                   const std::vector<Tensor*>& outputs, OpContext& context) {
  Tensor& out = *outputs[0];
  const int64_t n = out.count();
  if (n == 0) return;
  const float value = static_cast<const FillConstantOp&>(op).value();
  set_all<<<blocks_for(n), kThreads, 0, stream_of(context).stream()>>>(n, value,
                                                                       out.mutable_data());
  PURINE_CUDA_LAUNCHED(FillConstantOp::kType);
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(FillConstantOp, fill_constant);

}  // namespace purine::cuda
