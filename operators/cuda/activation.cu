// GPU kernels of operators/activation.hpp: the same formulas as cpu/activation.cpp, one
// element per thread step.
#include "operators/activation.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/elementwise_kernels.cuh"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

struct Relu {
  __device__ float operator()(float x) const { return x > 0.0f ? x : 0.0f; }
};
struct Sigmoid {
  __device__ float operator()(float x) const { return 1.0f / (1.0f + expf(-x)); }
};
struct Tanh {
  __device__ float operator()(float x) const { return tanhf(x); }
};
struct ReluGrad {
  __device__ float operator()(float y, float dy) const { return y > 0.0f ? dy : 0.0f; }
};
struct SigmoidGrad {
  __device__ float operator()(float y, float dy) const { return dy * y * (1.0f - y); }
};
struct TanhGrad {
  __device__ float operator()(float y, float dy) const { return dy * (1.0f - y * y); }
};

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

PURINE_REGISTER_GPU_KERNEL(ReluOp, forward<Relu>);
PURINE_REGISTER_GPU_KERNEL(SigmoidOp, forward<Sigmoid>);
PURINE_REGISTER_GPU_KERNEL(TanhOp, forward<Tanh>);
PURINE_REGISTER_GPU_KERNEL(ReluGradOp, backward<ReluGrad>);
PURINE_REGISTER_GPU_KERNEL(SigmoidGradOp, backward<SigmoidGrad>);
PURINE_REGISTER_GPU_KERNEL(TanhGradOp, backward<TanhGrad>);

}  // namespace purine::cuda
