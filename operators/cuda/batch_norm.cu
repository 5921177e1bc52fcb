// GPU kernels of operators/batch_norm.hpp, the CPU's formulas. One block per channel: each
// thread sums a fixed strided share of the channel's N * inner values in double, and the shares
// are added by a fixed tree in shared memory, so the sums (and everything after them) do not
// depend on scheduling.
#include "base/error.hpp"
#include "operators/batch_norm.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/elementwise_kernels.cuh"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

constexpr int kBlock = 256;

// The channel's values, in a fixed order: value j of channel c is x[(j / inner * C + c) *
// inner + j % inner].
struct ChannelView {
  int64_t n, channels, inner;
  __device__ int64_t count() const { return n * inner; }
  __device__ int64_t at(int64_t c, int64_t j) const {
    return (j / inner * channels + c) * inner + j % inner;
  }
};

// Adds `value` over the block (every thread passes its share); all threads get the total.
__device__ double block_sum(double value, double* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int half = kBlock / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();
  return total;
}

__global__ void bn_forward(ChannelView v, bool train, float eps, float momentum, const float* x,
                           const float* gamma, const float* beta, const float* running_mean,
                           const float* running_var, float* y, float* saved_mean,
                           float* saved_inv_std, float* new_mean, float* new_var) {
  __shared__ double shared[kBlock];
  const int64_t c = blockIdx.x, m = v.count();
  float mean = running_mean[c], var = running_var[c];
  if (train) {
    double sum = 0;
    for (int64_t j = threadIdx.x; j < m; j += kBlock) sum += x[v.at(c, j)];
    mean = float(block_sum(sum, shared) / double(m));
    double squares = 0;
    for (int64_t j = threadIdx.x; j < m; j += kBlock) {
      const float d = x[v.at(c, j)] - mean;
      squares += double(d) * d;
    }
    squares = block_sum(squares, shared);
    var = float(squares / double(m));
    if (threadIdx.x == 0) {
      new_mean[c] = momentum * running_mean[c] + (1.0f - momentum) * mean;
      new_var[c] = momentum * running_var[c] + (1.0f - momentum) * float(squares / double(m - 1));
    }
  } else if (threadIdx.x == 0) {
    new_mean[c] = mean;
    new_var[c] = var;
  }
  const float inv_std = 1.0f / sqrtf(var + eps);
  if (threadIdx.x == 0) {
    saved_mean[c] = mean;
    saved_inv_std[c] = inv_std;
  }
  const float scale = gamma[c] * inv_std, shift = beta[c] - mean * scale;
  for (int64_t j = threadIdx.x; j < m; j += kBlock) y[v.at(c, j)] = x[v.at(c, j)] * scale + shift;
}

__global__ void bn_backward(ChannelView v, bool train, const float* x, const float* gamma,
                            const float* saved_mean, const float* saved_inv_std, const float* dy,
                            float* dx, float* dgamma, float* dbeta) {
  __shared__ double shared[kBlock];
  const int64_t c = blockIdx.x, m = v.count();
  const float mean = saved_mean[c], inv_std = saved_inv_std[c];
  double sum_dy = 0, sum_dy_centered = 0;
  for (int64_t j = threadIdx.x; j < m; j += kBlock) {
    const int64_t i = v.at(c, j);
    sum_dy += dy[i];
    sum_dy_centered += double(dy[i]) * (x[i] - mean);
  }
  sum_dy = block_sum(sum_dy, shared);
  sum_dy_centered = block_sum(sum_dy_centered, shared);
  const float dg = float(sum_dy_centered) * inv_std;
  if (threadIdx.x == 0) {
    dgamma[c] = dg;
    dbeta[c] = float(sum_dy);
  }
  const float scale = gamma[c] * inv_std;
  const float mean_dy = train && m > 0 ? float(sum_dy / double(m)) : 0.0f;
  const float slope = train && m > 0 ? float(dg * inv_std / double(m)) : 0.0f;
  for (int64_t j = threadIdx.x; j < m; j += kBlock) {
    const int64_t i = v.at(c, j);
    dx[i] = scale * (dy[i] - mean_dy - (x[i] - mean) * slope);
  }
}

bool training(const Operator& op) {
  return op.attrs().get_string("mode", "train") == "train";
}

ChannelView view_of(const Shape& shape) { return {shape[0], shape[1], shape.count_from(2)}; }

void forward(const Operator& op, const std::vector<const Tensor*>& inputs,
             const std::vector<Tensor*>& outputs, OpContext& context) {
  require_contiguous_gpu(BatchNormOp::kType, inputs, outputs);
  const Shape& shape = inputs[0]->shape();
  if (shape[1] == 0) return;
  bn_forward<<<unsigned(shape[1]), kBlock, 0, stream_of(context).stream()>>>(
      view_of(shape), training(op), float(op.attrs().get_float("eps", 1e-5)),
      float(op.attrs().get_float("momentum", 0.9)), inputs[0]->data(), inputs[1]->data(),
      inputs[2]->data(), inputs[3]->data(), inputs[4]->data(), outputs[0]->mutable_data(),
      outputs[1]->mutable_data(), outputs[2]->mutable_data(), outputs[3]->mutable_data(),
      outputs[4]->mutable_data());
  PURINE_CUDA_LAUNCHED(BatchNormOp::kType);
}

// (x, gamma, saved_mean, saved_inv_std, dy) -> (dx, dgamma, dbeta)
void backward(const Operator& op, const std::vector<const Tensor*>& inputs,
              const std::vector<Tensor*>& outputs, OpContext& context) {
  require_contiguous_gpu(BatchNormGradOp::kType, inputs, outputs);
  const Shape& shape = inputs[0]->shape();
  if (shape[1] == 0) return;
  bn_backward<<<unsigned(shape[1]), kBlock, 0, stream_of(context).stream()>>>(
      view_of(shape), training(op), inputs[0]->data(), inputs[1]->data(), inputs[2]->data(),
      inputs[3]->data(), inputs[4]->data(), outputs[0]->mutable_data(),
      outputs[1]->mutable_data(), outputs[2]->mutable_data());
  PURINE_CUDA_LAUNCHED(BatchNormGradOp::kType);
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(BatchNormOp, forward);
PURINE_REGISTER_GPU_KERNEL(BatchNormGradOp, backward);

}  // namespace purine::cuda
