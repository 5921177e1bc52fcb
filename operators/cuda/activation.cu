// GPU kernels of operators/activation.hpp: the formulas of operators/formulas.hpp, as on the CPU,
// one element per thread step.
#include "operators/activation.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/elementwise_kernels.cuh"
#include "operators/formulas.hpp"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

template <typename F>
void forward(const Operator& op, const std::vector<const Tensor*>& inputs,
             const std::vector<Tensor*>& outputs, OpContext& context) {
  const std::string type = op.type();
  launch_map1(type.c_str(), stream_of(context).stream(), *inputs[0], *outputs[0], F());
}

template <typename F>
void backward(const Operator& op, const std::vector<const Tensor*>& inputs,
              const std::vector<Tensor*>& outputs, OpContext& context) {
  const std::string type = op.type();
  launch_map2(type.c_str(), stream_of(context).stream(), *inputs[0], *inputs[1], *outputs[0], F());
}

struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct ReluGradOfSum {
  __device__ float operator()(float y, float a, float b) const {
    return formula::ReluGrad()(y, a + b);
  }
};

// (y, dy_0, ..., dy_k-1): the parts of dy added in input order, as the CPU and the sum op add
// them; two parts in one pass.
void relu_grad(const Operator& op, const std::vector<const Tensor*>& inputs,
               const std::vector<Tensor*>& outputs, OpContext& context) {
  const cudaStream_t stream = stream_of(context).stream();
  const Tensor &y = *inputs[0], &dy = *inputs[1];
  Tensor& dx = *outputs[0];
  if (inputs.size() == 2) return launch_map2("relu_grad", stream, y, dy, dx, formula::ReluGrad());
  if (inputs.size() == 3)
    return launch_map3("relu_grad", stream, y, dy, *inputs[2], dx, ReluGradOfSum());
  launch_map2("relu_grad", stream, dy, *inputs[2], dx, Add());
  for (size_t i = 3; i < inputs.size(); ++i)
    launch_map2("relu_grad", stream, dx, *inputs[i], dx, Add());
  launch_map2("relu_grad", stream, y, dx, dx, formula::ReluGrad());
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(ReluOp, forward<formula::Relu>);
PURINE_REGISTER_GPU_KERNEL(SigmoidOp, forward<formula::Sigmoid>);
PURINE_REGISTER_GPU_KERNEL(TanhOp, forward<formula::Tanh>);
PURINE_REGISTER_GPU_KERNEL(ReluGradOp, relu_grad);
PURINE_REGISTER_GPU_KERNEL(SigmoidGradOp, backward<formula::SigmoidGrad>);
PURINE_REGISTER_GPU_KERNEL(TanhGradOp, backward<formula::TanhGrad>);

}  // namespace purine::cuda
