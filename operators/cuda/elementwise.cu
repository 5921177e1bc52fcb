// GPU kernels of operators/elementwise.hpp. sum and sum_relu add their inputs in input order per
// element, as the CPU kernels do, so both give the same result bit for bit.
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/elementwise_kernels.cuh"
#include "operators/elementwise.hpp"
#include "operators/formulas.hpp"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Multiply {
  __device__ float operator()(float a, float b) const { return a * b; }
};
struct Scale {
  float alpha;
  __device__ float operator()(float x) const { return alpha * x; }
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
  // ((x0 + x1) + x2) + ...: y may be any input, as each pass reads before it writes.
  launch_map2("sum", stream, *inputs[0], *inputs[1], y, Add());
  for (size_t i = 2; i < inputs.size(); ++i) launch_map2("sum", stream, y, *inputs[i], y, Add());
}

struct AddRelu {
  __device__ float operator()(float a, float b) const { return formula::Relu()(a + b); }
};

// sum's passes with the ReLU in the last one.
void sum_relu(const Operator& op, const std::vector<const Tensor*>& inputs,
              const std::vector<Tensor*>& outputs, OpContext& context) {
  const cudaStream_t stream = stream_of(context).stream();
  Tensor& y = *outputs[0];
  if (inputs.size() == 1) return launch_map1("sum_relu", stream, *inputs[0], y, formula::Relu());
  const size_t last = inputs.size() - 1;
  const Tensor* sum = inputs[0];
  for (size_t i = 1; i < last; ++i) {
    launch_map2("sum_relu", stream, *sum, *inputs[i], y, Add());
    sum = &y;
  }
  launch_map2("sum_relu", stream, *sum, *inputs[last], y, AddRelu());
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
