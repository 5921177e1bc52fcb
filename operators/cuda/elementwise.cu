// GPU kernels of operators/elementwise.hpp. sum and sum_relu add their inputs in input order per
// element in one pass (sum_terms.cuh), as the CPU kernels do, so both give the same result bit
// for bit.
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/elementwise_kernels.cuh"
#include "operators/cuda/sum_terms.cuh"
#include "operators/elementwise.hpp"
#include "operators/formulas.hpp"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

struct Multiply {
  __device__ float operator()(float a, float b) const { return a * b; }
};
struct Scale {
  float alpha;
  __device__ float operator()(float x) const { return alpha * x; }
};

struct Identity {
  __device__ float operator()(int64_t, float sum) const { return sum; }
};
struct ReluOfSum {
  __device__ float operator()(int64_t, float sum) const { return formula::Relu()(sum); }
};

void sum(const Operator& op, const std::vector<const Tensor*>& inputs,
         const std::vector<Tensor*>& outputs, OpContext& context) {
  const cudaStream_t stream = stream_of(context).stream();
  Tensor& y = *outputs[0];
  if (inputs.size() == 1) {
    if (inputs[0]->data() != y.data())
      PURINE_CUDA_CALL(
          "sum", cudaMemcpyAsync(y.mutable_data(), inputs[0]->data(), y.count() * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
    return;
  }
  launch_sum_terms("sum", stream, inputs, 0, y, Identity());
}

void sum_relu(const Operator& op, const std::vector<const Tensor*>& inputs,
              const std::vector<Tensor*>& outputs, OpContext& context) {
  launch_sum_terms("sum_relu", stream_of(context).stream(), inputs, 0, *outputs[0], ReluOfSum());
}

void mul(const Operator& op, const std::vector<const Tensor*>& inputs,
         const std::vector<Tensor*>& outputs, OpContext& context) {
  launch_map2("mul", stream_of(context).stream(), *inputs[0], *inputs[1], *outputs[0], Multiply());
}

void scale(const Operator& op, const std::vector<const Tensor*>& inputs,
           const std::vector<Tensor*>& outputs, OpContext& context) {
  const float alpha = static_cast<const ScaleOp&>(op).alpha();
  launch_map1("scale", stream_of(context).stream(), *inputs[0], *outputs[0], Scale{alpha});
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(SumOp, sum);
PURINE_REGISTER_GPU_KERNEL(SumReluOp, sum_relu);
PURINE_REGISTER_GPU_KERNEL(MulOp, mul);
PURINE_REGISTER_GPU_KERNEL(ScaleOp, scale);

}  // namespace purine::cuda
