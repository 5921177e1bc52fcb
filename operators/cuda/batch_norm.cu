// GPU kernels of operators/batch_norm.hpp, the CPU's formulas (x read as [N, C, inner]). The
// per-channel sums run on the whole GPU with reduce_channels (channel_kernels.cuh): a (C, slices)
// grid adds fixed slices of each channel in double into partials in the stream's workspace, then
// one warp per channel adds its partials in slice order and finishes the channel's statistics.
// The order depends on the shape alone, so results are bit-identical run to run.
//   forward, train: sum(x) -> mean; sum((x - mean)^2) -> variance, inv_std, running statistics
//     (two passes, as the CPU); then y element-wise.
//   forward, test: the statistics per channel, then y element-wise.
//   backward: sum(dy) and sum(dy (x - mean)) together -> dgamma, dbeta and the two per-channel
//     coefficients of dx (kept in the workspace after the partials); then dx element-wise.
// The element-wise passes follow each element's channel with additions (for_each_in_channels).
// batch_norm_relu and its gradient run the same kernels: y through relu's expression, and the
// gradient reads relu_grad(y, dy) wherever the others read dy, without writing it out.
#include "base/error.hpp"
#include "operators/batch_norm.hpp"
#include "operators/cuda/channel_kernels.cuh"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/formulas.hpp"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

// ---- forward ----

struct SumOf {
  const float* x;
  __device__ void operator()(int64_t, int64_t i, double (&acc)[1]) const { acc[0] += x[i]; }
};

struct StoreMean {
  double m;
  float* saved_mean;
  __device__ void operator()(int64_t c, const double (&total)[1]) const {
    saved_mean[c] = float(total[0] / m);
  }
};

struct SquaresAboutMean {
  const float* x;
  const float* mean;
  __device__ void operator()(int64_t c, int64_t i, double (&acc)[1]) const {
    const float d = x[i] - mean[c];
    acc[0] += d * d;
  }
};

// The variance's sum of squares -> inv_std and the running statistics.
struct StoreVariance {
  double m;
  float eps, momentum;
  const float *running_mean, *running_var, *saved_mean;
  float *saved_inv_std, *new_mean, *new_var;
  __device__ void operator()(int64_t c, const double (&squares)[1]) const {
    const float var = float(squares[0] / m), unbiased = float(squares[0] / (m - 1));
    new_mean[c] = momentum * running_mean[c] + (1.0f - momentum) * saved_mean[c];
    new_var[c] = momentum * running_var[c] + (1.0f - momentum) * unbiased;
    saved_inv_std[c] = 1.0f / sqrtf(var + eps);
  }
};

// Test mode: the running statistics are the statistics (one thread per channel; no sums).
__global__ void test_statistics(int64_t channels, float eps, const float* running_mean,
                                const float* running_var, float* saved_mean, float* saved_inv_std,
                                float* new_mean, float* new_var) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < channels;
       c += int64_t(gridDim.x) * blockDim.x) {
    const float mean = running_mean[c], var = running_var[c];
    saved_mean[c] = mean;
    saved_inv_std[c] = 1.0f / sqrtf(var + eps);
    new_mean[c] = mean;
    new_var[c] = var;
  }
}

// batch_norm_relu's y with Relu: relu's expression, the unfused chain's bits.
template <bool Relu>
struct Normalize {
  const float *x, *gamma, *beta, *mean, *inv_std;
  float* y;
  __device__ void operator()(int64_t i, int64_t c) const {
    const float v = formula::BatchNormAffine(gamma[c], beta[c], mean[c], inv_std[c])(x[i]);
    y[i] = Relu ? formula::Relu()(v) : v;
  }
};

// ---- backward ----

// The gradient reaching batch norm's y: dy, or batch_norm_relu_grad's relu_grad(y, dy) (y null
// without a ReLU).
__device__ inline float gradient_at(const float* y, const float* dy, int64_t i) {
  return y && !(y[i] > 0.0f) ? 0.0f : dy[i];
}

// acc[0] = sum(dy), acc[1] = sum(dy (x - mean)).
struct GradSums {
  const float *x, *y, *dy, *mean;
  __device__ void operator()(int64_t c, int64_t i, double (&acc)[2]) const {
    const float g = gradient_at(y, dy, i);
    acc[0] += g;
    acc[1] += g * (x[i] - mean[c]);
  }
};

// dx = scale (dy - mean_dy - (x - mean) slope), scale = gamma inv_std; mean_dy and slope are 0
// in test mode.
struct DxCoefficients {
  float mean_dy, slope;
};

struct StoreGradients {
  double m;
  bool train;
  const float* inv_std;
  float *dgamma, *dbeta;
  DxCoefficients* coefficients;
  __device__ void operator()(int64_t c, const double (&sums)[2]) const {
    const float dg = float(sums[1]) * inv_std[c];
    dgamma[c] = dg;
    dbeta[c] = float(sums[0]);
    const bool use = train && m > 0;
    coefficients[c] = {use ? float(sums[0] / m) : 0.0f, use ? float(dg * inv_std[c] / m) : 0.0f};
  }
};

struct InputGradient {
  const float *x, *y, *dy, *gamma, *mean, *inv_std;
  const DxCoefficients* coefficients;
  float* dx;
  __device__ void operator()(int64_t i, int64_t c) const {
    const float scale = gamma[c] * inv_std[c];
    const DxCoefficients k = coefficients[c];
    dx[i] = scale * (gradient_at(y, dy, i) - k.mean_dy - (x[i] - mean[c]) * k.slope);
  }
};

// ---- kernels ----

const BatchNormParams& params_of(const Operator& op) {
  return static_cast<const BatchNormFamily&>(op).params();
}

ChannelLayout layout_of(const Shape& shape) { return {shape[0], shape[1], shape.count_from(2)}; }

double values_per_channel(const ChannelLayout& l) { return double(l.samples * l.inner); }

// (x, gamma, beta, running_mean, running_var) -> (y, saved_mean, saved_inv_std, new_mean, new_var)
// of batch_norm, or of batch_norm_relu with Relu.
template <bool Relu>
void forward(const Operator& op, const std::vector<const Tensor*>& inputs,
             const std::vector<Tensor*>& outputs, OpContext& context) {
  const char* type = Relu ? BatchNormReluOp::kType : BatchNormOp::kType;
  const ChannelLayout l = layout_of(inputs[0]->shape());
  if (l.channels == 0) return;
  CudaStream& stream = stream_of(context);
  const BatchNormParams& p = params_of(op);
  const float eps = p.eps;
  const float* x = inputs[0]->data();
  float* saved_mean = outputs[1]->mutable_data();
  float* saved_inv_std = outputs[2]->mutable_data();
  if (p.training) {
    // Both passes reuse the same partials: stream order keeps them apart.
    double* partials = static_cast<double*>(stream.workspace(reduce_channels_bytes(1, l)));
    const double m = values_per_channel(l);
    reduce_channels<1>(type, stream.stream(), l, partials, SumOf{x}, StoreMean{m, saved_mean});
    reduce_channels<1>(
        type, stream.stream(), l, partials, SquaresAboutMean{x, saved_mean},
        StoreVariance{m, eps, p.momentum, inputs[3]->data(), inputs[4]->data(), saved_mean,
                      saved_inv_std, outputs[3]->mutable_data(), outputs[4]->mutable_data()});
  } else {
    test_statistics<<<blocks_for(l.channels), kThreads, 0, stream.stream()>>>(
        l.channels, eps, inputs[3]->data(), inputs[4]->data(), saved_mean, saved_inv_std,
        outputs[3]->mutable_data(), outputs[4]->mutable_data());
    PURINE_CUDA_LAUNCHED(type);
  }
  for_each_in_channels(type, stream.stream(), l,
                       Normalize<Relu>{x, inputs[1]->data(), inputs[2]->data(), saved_mean,
                                       saved_inv_std, outputs[0]->mutable_data()});
}

// (x, gamma, saved_mean, saved_inv_std, dy) -> (dx, dgamma, dbeta) of batch_norm_grad, or with Relu
// (x, gamma, saved_mean, saved_inv_std, y, dy) -> (dx, dgamma, dbeta) of batch_norm_relu_grad.
template <bool Relu>
void backward(const Operator& op, const std::vector<const Tensor*>& inputs,
              const std::vector<Tensor*>& outputs, OpContext& context) {
  const char* type = Relu ? BatchNormReluGradOp::kType : BatchNormGradOp::kType;
  const ChannelLayout l = layout_of(inputs[0]->shape());
  if (l.channels == 0) return;
  CudaStream& stream = stream_of(context);
  // Workspace: the partials, then the coefficients (a size in doubles keeps them aligned).
  const size_t partial_bytes = reduce_channels_bytes(2, l);
  char* workspace = static_cast<char*>(
      stream.workspace(partial_bytes + size_t(l.channels) * sizeof(DxCoefficients)));
  double* partials = reinterpret_cast<double*>(workspace);
  DxCoefficients* coefficients = reinterpret_cast<DxCoefficients*>(workspace + partial_bytes);
  const float *x = inputs[0]->data(), *gamma = inputs[1]->data(), *mean = inputs[2]->data(),
              *inv_std = inputs[3]->data();
  const float* y = Relu ? inputs[4]->data() : nullptr;
  const float* dy = inputs[Relu ? 5 : 4]->data();
  reduce_channels<2>(
      type, stream.stream(), l, partials, GradSums{x, y, dy, mean},
      StoreGradients{values_per_channel(l), params_of(op).training, inv_std,
                     outputs[1]->mutable_data(), outputs[2]->mutable_data(), coefficients});
  for_each_in_channels(
      type, stream.stream(), l,
      InputGradient{x, y, dy, gamma, mean, inv_std, coefficients, outputs[0]->mutable_data()});
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(BatchNormOp, forward<false>);
PURINE_REGISTER_GPU_KERNEL(BatchNormGradOp, backward<false>);
PURINE_REGISTER_GPU_KERNEL(BatchNormReluOp, forward<true>);
PURINE_REGISTER_GPU_KERNEL(BatchNormReluGradOp, backward<true>);

}  // namespace purine::cuda
