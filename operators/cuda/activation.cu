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

}  // namespace

PURINE_REGISTER_GPU_KERNEL(ReluOp, forward<formula::Relu>);
PURINE_REGISTER_GPU_KERNEL(SigmoidOp, forward<formula::Sigmoid>);
PURINE_REGISTER_GPU_KERNEL(TanhOp, forward<formula::Tanh>);
PURINE_REGISTER_GPU_KERNEL(ReluGradOp, backward<formula::ReluGrad>);
PURINE_REGISTER_GPU_KERNEL(SigmoidGradOp, backward<formula::SigmoidGrad>);
PURINE_REGISTER_GPU_KERNEL(TanhGradOp, backward<formula::TanhGrad>);

}  // namespace purine::cuda
