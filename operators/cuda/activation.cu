// GPU kernels of operators/activation.hpp: the formulas of operators/formulas.hpp, as on the CPU,
// one element per thread step.
#include "operators/activation.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/elementwise_kernels.cuh"
#include "operators/cuda/sum_terms.cuh"
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

// relu_grad's last step over the sum of its dy parts: the ReLU's gradient at y.
struct ReluGradAt {
  const float* y;
  __device__ float operator()(int64_t i, float dy) const { return formula::ReluGrad()(y[i], dy); }
};

// (y, dy_0, ..., dy_k-1): the parts of dy added in input order, as the CPU and the sum op add
// them, in the same pass.
void relu_grad(const Operator& op, const std::vector<const Tensor*>& inputs,
               const std::vector<Tensor*>& outputs, OpContext& context) {
  const cudaStream_t stream = stream_of(context).stream();
  if (inputs.size() == 2)
    return launch_map2("relu_grad", stream, *inputs[0], *inputs[1], *outputs[0],
                       formula::ReluGrad());
  launch_sum_terms("relu_grad", stream, inputs, 1, *outputs[0], ReluGradAt{inputs[0]->data()});
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(ReluOp, forward<formula::Relu>);
PURINE_REGISTER_GPU_KERNEL(SigmoidOp, forward<formula::Sigmoid>);
PURINE_REGISTER_GPU_KERNEL(TanhOp, forward<formula::Tanh>);
PURINE_REGISTER_GPU_KERNEL(ReluGradOp, relu_grad);
PURINE_REGISTER_GPU_KERNEL(SigmoidGradOp, backward<formula::SigmoidGrad>);
PURINE_REGISTER_GPU_KERNEL(TanhGradOp, backward<formula::TanhGrad>);

}  // namespace purine::cuda
