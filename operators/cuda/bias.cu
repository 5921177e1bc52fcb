// GPU kernels of operators/bias.hpp (x is read as [N, C, inner]). bias adds b[c] in a
// grid-stride loop that follows each element's channel with additions (channel_kernels.cuh);
// bias_relu does the same and applies relu's expression (activation.cu) to the sum.
// bias_relu_grad is bias_grad's reduction over dx = relu_grad(y, dy), each element written as
// it is added (each is visited once): relu_grad then bias_grad in one kernel (two where the
// channels need the second stage), the same floats.
// bias_grad sums each channel with reduce_channels: a (C, slices) grid adds fixed slices of the
// channel's N * inner values into partials in the stream's workspace, then one warp per channel
// adds its partials in slice order; the order depends on the shape alone, so the result is
// bit-identical run to run (in double, then rounded to float).
#include "operators/bias.hpp"
#include "operators/cuda/channel_kernels.cuh"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/formulas.hpp"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

ChannelLayout layout_of(const Shape& shape) { return {shape[0], shape[1], shape.count_from(2)}; }

struct AddBias {
  const float* x;
  const float* b;
  float* y;
  __device__ void operator()(int64_t i, int64_t c) const { y[i] = x[i] + b[c]; }
};

struct AddBiasRelu {
  const float* x;
  const float* b;
  float* y;
  __device__ void operator()(int64_t i, int64_t c) const { y[i] = formula::Relu()(x[i] + b[c]); }
};

struct SumOf {
  const float* dy;
  __device__ void operator()(int64_t, int64_t i, double (&acc)[1]) const { acc[0] += dy[i]; }
};

struct ReluGradSumOf {
  const float* y;
  const float* dy;
  float* dx;
  __device__ void operator()(int64_t, int64_t i, double (&acc)[1]) const {
    const float v = formula::ReluGrad()(y[i], dy[i]);
    dx[i] = v;
    acc[0] += v;
  }
};

struct StoreSum {
  float* db;
  __device__ void operator()(int64_t c, const double (&total)[1]) const { db[c] = float(total[0]); }
};

void bias(const Operator&, const std::vector<const Tensor*>& inputs,
          const std::vector<Tensor*>& outputs, OpContext& context) {
  for_each_in_channels(BiasOp::kType, stream_of(context).stream(), layout_of(inputs[0]->shape()),
                       AddBias{inputs[0]->data(), inputs[1]->data(), outputs[0]->mutable_data()});
}

void bias_relu(const Operator&, const std::vector<const Tensor*>& inputs,
               const std::vector<Tensor*>& outputs, OpContext& context) {
  for_each_in_channels(
      BiasReluOp::kType, stream_of(context).stream(), layout_of(inputs[0]->shape()),
      AddBiasRelu{inputs[0]->data(), inputs[1]->data(), outputs[0]->mutable_data()});
}

void bias_grad(const Operator&, const std::vector<const Tensor*>& inputs,
               const std::vector<Tensor*>& outputs, OpContext& context) {
  const ChannelLayout l = layout_of(inputs[0]->shape());
  if (l.channels == 0) return;
  CudaStream& stream = stream_of(context);
  double* partials = static_cast<double*>(stream.workspace(reduce_channels_bytes(1, l)));
  reduce_channels<1>(BiasGradOp::kType, stream.stream(), l, partials, SumOf{inputs[0]->data()},
                     StoreSum{outputs[0]->mutable_data()});
}

void bias_relu_grad(const Operator&, const std::vector<const Tensor*>& inputs,
                    const std::vector<Tensor*>& outputs, OpContext& context) {
  const ChannelLayout l = layout_of(inputs[0]->shape());
  if (l.channels == 0) return;
  CudaStream& stream = stream_of(context);
  double* partials = static_cast<double*>(stream.workspace(reduce_channels_bytes(1, l)));
  reduce_channels<1>(
      BiasReluGradOp::kType, stream.stream(), l, partials,
      ReluGradSumOf{inputs[0]->data(), inputs[1]->data(), outputs[0]->mutable_data()},
      StoreSum{outputs[1]->mutable_data()});
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(BiasOp, bias);
PURINE_REGISTER_GPU_KERNEL(BiasReluOp, bias_relu);
PURINE_REGISTER_GPU_KERNEL(BiasGradOp, bias_grad);
PURINE_REGISTER_GPU_KERNEL(BiasReluGradOp, bias_relu_grad);

}  // namespace purine::cuda
