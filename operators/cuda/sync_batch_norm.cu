// GPU kernels of operators/sync_batch_norm.hpp, the CPU's formulas (x read as [N, C, inner]). The
// per-channel sums run on the whole GPU with reduce_channels (channel_kernels.cuh), in double in a
// fixed two-stage order (bit-identical run to run); the finishing call of channel 0 also writes
// the count M after the C (or 2C) sums. The per-channel coefficients from the totals are one
// thread per channel (no sums: a handful of flops each); y and dx are element-wise passes.
#include "base/error.hpp"
#include "operators/cuda/channel_kernels.cuh"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/formulas.hpp"
#include "operators/gpu_kernel.hpp"
#include "operators/sync_batch_norm.hpp"

namespace purine::cuda {

namespace {

ChannelLayout layout_of(const Shape& shape) { return {shape[0], shape[1], shape.count_from(2)}; }

float values_per_channel(const ChannelLayout& l) { return float(l.samples * l.inner); }

// ---- batch_norm_sums, batch_norm_square_sums ----

struct SumOf {
  const float* x;
  __device__ void operator()(int64_t, int64_t i, double (&acc)[1]) const { acc[0] += x[i]; }
};

struct SquaresAboutTotalMean {
  const float* x;
  const float* totals;  // [C + 1]
  int64_t channels;
  __device__ void operator()(int64_t c, int64_t i, double (&acc)[1]) const {
    const float mean = float(double(totals[c]) / double(totals[channels]));
    const float d = x[i] - mean;
    acc[0] += d * d;
  }
};

// out[c] = the sum; channel 0 also writes out[channels] = M.
struct StoreSumAndCount {
  float* out;
  int64_t channels;
  float m;
  __device__ void operator()(int64_t c, const double (&total)[1]) const {
    out[c] = float(total[0]);
    if (c == 0) out[channels] = m;
  }
};

void sums(const Operator&, const std::vector<const Tensor*>& inputs,
          const std::vector<Tensor*>& outputs, OpContext& context) {
  const ChannelLayout l = layout_of(inputs[0]->shape());
  if (l.channels == 0) return;
  CudaStream& stream = stream_of(context);
  double* partials = static_cast<double*>(stream.workspace(reduce_channels_bytes(1, l)));
  reduce_channels<1>(
      BatchNormSumsOp::kType, stream.stream(), l, partials, SumOf{inputs[0]->data()},
      StoreSumAndCount{outputs[0]->mutable_data(), l.channels, values_per_channel(l)});
}

void square_sums(const Operator&, const std::vector<const Tensor*>& inputs,
                 const std::vector<Tensor*>& outputs, OpContext& context) {
  const ChannelLayout l = layout_of(inputs[0]->shape());
  if (l.channels == 0) return;
  CudaStream& stream = stream_of(context);
  double* partials = static_cast<double*>(stream.workspace(reduce_channels_bytes(1, l)));
  reduce_channels<1>(
      BatchNormSquareSumsOp::kType, stream.stream(), l, partials,
      SquaresAboutTotalMean{inputs[0]->data(), inputs[1]->data(), l.channels},
      StoreSumAndCount{outputs[0]->mutable_data(), l.channels, values_per_channel(l)});
}

// ---- sync_batch_norm ----

// The statistics from the totals, per channel.
__global__ void statistics(int64_t channels, float eps, float momentum, const float* sums,
                           const float* squares, const float* running_mean,
                           const float* running_var, float* saved_mean, float* saved_inv_std,
                           float* new_mean, float* new_var) {
  const double m = sums[channels];
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < channels;
       c += int64_t(gridDim.x) * blockDim.x) {
    const float mean = float(double(sums[c]) / m);
    const float var = float(double(squares[c]) / m);
    const float unbiased = float(double(squares[c]) / (m - 1));
    new_mean[c] = momentum * running_mean[c] + (1.0f - momentum) * mean;
    new_var[c] = momentum * running_var[c] + (1.0f - momentum) * unbiased;
    saved_mean[c] = mean;
    saved_inv_std[c] = 1.0f / sqrtf(var + eps);
  }
}

struct Normalize {
  const float *x, *gamma, *beta, *mean, *inv_std;
  float* y;
  __device__ void operator()(int64_t i, int64_t c) const {
    y[i] = formula::BatchNormAffine(gamma[c], beta[c], mean[c], inv_std[c])(x[i]);
  }
};

void forward(const Operator& op, const std::vector<const Tensor*>& inputs,
             const std::vector<Tensor*>& outputs, OpContext& context) {
  const ChannelLayout l = layout_of(inputs[0]->shape());
  if (l.channels == 0) return;
  CudaStream& stream = stream_of(context);
  const BatchNormParams& params = static_cast<const SyncBatchNormOp&>(op).params();
  float* saved_mean = outputs[1]->mutable_data();
  float* saved_inv_std = outputs[2]->mutable_data();
  statistics<<<blocks_for(l.channels), kThreads, 0, stream.stream()>>>(
      l.channels, params.eps, params.momentum, inputs[5]->data(), inputs[6]->data(),
      inputs[3]->data(), inputs[4]->data(), saved_mean, saved_inv_std, outputs[3]->mutable_data(),
      outputs[4]->mutable_data());
  PURINE_CUDA_LAUNCHED(SyncBatchNormOp::kType);
  for_each_in_channels(SyncBatchNormOp::kType, stream.stream(), l,
                       Normalize{inputs[0]->data(), inputs[1]->data(), inputs[2]->data(),
                                 saved_mean, saved_inv_std, outputs[0]->mutable_data()});
}

// ---- batch_norm_grad_sums ----

// acc[0] = sum(dy), acc[1] = sum(dy (x - mean)).
struct GradSums {
  const float *x, *dy, *mean;
  __device__ void operator()(int64_t c, int64_t i, double (&acc)[2]) const {
    acc[0] += dy[i];
    acc[1] += dy[i] * (x[i] - mean[c]);
  }
};

struct StoreGradSums {
  float* out;
  int64_t channels;
  float m;
  __device__ void operator()(int64_t c, const double (&sums)[2]) const {
    out[c] = float(sums[0]);
    out[channels + c] = float(sums[1]);
    if (c == 0) out[2 * channels] = m;
  }
};

void grad_sums(const Operator&, const std::vector<const Tensor*>& inputs,
               const std::vector<Tensor*>& outputs, OpContext& context) {
  const ChannelLayout l = layout_of(inputs[0]->shape());
  if (l.channels == 0) return;
  CudaStream& stream = stream_of(context);
  double* partials = static_cast<double*>(stream.workspace(reduce_channels_bytes(2, l)));
  reduce_channels<2>(BatchNormGradSumsOp::kType, stream.stream(), l, partials,
                     GradSums{inputs[0]->data(), inputs[2]->data(), inputs[1]->data()},
                     StoreGradSums{outputs[0]->mutable_data(), l.channels, values_per_channel(l)});
}

// ---- sync_batch_norm_grad ----

struct DxCoefficients {
  float scale, mean_dy, slope;
};

// dgamma, dbeta from this replica's sums; dx's coefficients from the totals.
__global__ void grad_coefficients(int64_t channels, const float* gamma, const float* inv_std,
                                  const float* local, const float* total, float* dgamma,
                                  float* dbeta, DxCoefficients* coefficients) {
  const double m = total[2 * channels];
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < channels;
       c += int64_t(gridDim.x) * blockDim.x) {
    dgamma[c] = local[channels + c] * inv_std[c];
    dbeta[c] = local[c];
    const float dg = total[channels + c] * inv_std[c];
    coefficients[c] = {gamma[c] * inv_std[c], m > 0 ? float(double(total[c]) / m) : 0.0f,
                       m > 0 ? float(double(dg * inv_std[c]) / m) : 0.0f};
  }
}

struct InputGradient {
  const float *x, *dy, *mean;
  const DxCoefficients* coefficients;
  float* dx;
  __device__ void operator()(int64_t i, int64_t c) const {
    const DxCoefficients k = coefficients[c];
    dx[i] = k.scale * (dy[i] - k.mean_dy - (x[i] - mean[c]) * k.slope);
  }
};

void backward(const Operator&, const std::vector<const Tensor*>& inputs,
              const std::vector<Tensor*>& outputs, OpContext& context) {
  const ChannelLayout l = layout_of(inputs[0]->shape());
  if (l.channels == 0) return;
  CudaStream& stream = stream_of(context);
  DxCoefficients* coefficients =
      static_cast<DxCoefficients*>(stream.workspace(size_t(l.channels) * sizeof(DxCoefficients)));
  grad_coefficients<<<blocks_for(l.channels), kThreads, 0, stream.stream()>>>(
      l.channels, inputs[1]->data(), inputs[3]->data(), inputs[5]->data(), inputs[6]->data(),
      outputs[1]->mutable_data(), outputs[2]->mutable_data(), coefficients);
  PURINE_CUDA_LAUNCHED(SyncBatchNormGradOp::kType);
  for_each_in_channels(SyncBatchNormGradOp::kType, stream.stream(), l,
                       InputGradient{inputs[0]->data(), inputs[4]->data(), inputs[2]->data(),
                                     coefficients, outputs[0]->mutable_data()});
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(BatchNormSumsOp, sums);
PURINE_REGISTER_GPU_KERNEL(BatchNormSquareSumsOp, square_sums);
PURINE_REGISTER_GPU_KERNEL(SyncBatchNormOp, forward);
PURINE_REGISTER_GPU_KERNEL(BatchNormGradSumsOp, grad_sums);
PURINE_REGISTER_GPU_KERNEL(SyncBatchNormGradOp, backward);

}  // namespace purine::cuda
