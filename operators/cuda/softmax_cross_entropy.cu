// GPU kernels of operators/softmax_cross_entropy.hpp. One thread per row computes the row's
// probabilities and loss as the CPU kernel does; one thread then adds the row losses in row order
// (in double), so the loss does not depend on the launch. Labels are not checked on the host
// (they live on the device): a row whose label is not an integer in [0, C) gets a NaN loss, which
// the trainer's divergence check reports (the data readers check labels when they load them).
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/elementwise_kernels.cuh"
#include "operators/gpu_kernel.hpp"
#include "operators/softmax_cross_entropy.hpp"

namespace purine::cuda {

namespace {

// The label of a row, or -1 when it is no valid class index.
__device__ int64_t label_of(float value, int64_t classes) {
  return value >= 0.0f && value < float(classes) && value == floorf(value) ? int64_t(value) : -1;
}

__global__ void softmax_rows(int64_t rows, int64_t classes, const float* logits,
                             const float* labels, float* probs, double* row_loss) {
  const int64_t n = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (n >= rows) return;
  const float* x = logits + n * classes;
  float* p = probs + n * classes;
  float max = x[0];
  for (int64_t c = 1; c < classes; ++c) max = fmaxf(max, x[c]);
  float sum = 0.0f;
  for (int64_t c = 0; c < classes; ++c) {
    p[c] = expf(x[c] - max);
    sum += p[c];
  }
  const float inv = 1.0f / sum;
  for (int64_t c = 0; c < classes; ++c) p[c] *= inv;
  const int64_t label = label_of(labels[n], classes);
  row_loss[n] = label < 0 ? nan("") : log(double(sum)) + max - x[label];
}

__global__ void mean_of_rows(int64_t rows, const double* row_loss, float* loss) {
  double total = 0.0;
  for (int64_t n = 0; n < rows; ++n) total += row_loss[n];
  *loss = rows > 0 ? float(total / rows) : 0.0f;
}

__global__ void loss_grad(int64_t rows, int64_t classes, const float* probs, const float* labels,
                          const float* dloss, float* dlogits) {
  const float scale = rows > 0 ? *dloss / float(rows) : 0.0f;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * classes;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i / classes, c = i % classes;
    const int64_t label = label_of(labels[n], classes);
    dlogits[i] = label < 0 ? nanf("") : scale * probs[i] - (c == label ? scale : 0.0f);
  }
}

void forward(const Operator&, const std::vector<const Tensor*>& inputs,
             const std::vector<Tensor*>& outputs, OpContext& context) {
  require_contiguous_gpu(SoftmaxCrossEntropyOp::kType, inputs, outputs);
  CudaStream& stream = stream_of(context);
  const int64_t rows = inputs[0]->shape()[0], classes = inputs[0]->shape()[1];
  double* row_loss = static_cast<double*>(stream.workspace(std::max<int64_t>(rows, 1) * 8));
  if (rows > 0) {
    softmax_rows<<<blocks_for(rows), kThreads, 0, stream.stream()>>>(
        rows, classes, inputs[0]->data(), inputs[1]->data(), outputs[1]->mutable_data(), row_loss);
    PURINE_CUDA_LAUNCHED(SoftmaxCrossEntropyOp::kType);
  }
  mean_of_rows<<<1, 1, 0, stream.stream()>>>(rows, row_loss, outputs[0]->mutable_data());
  PURINE_CUDA_LAUNCHED(SoftmaxCrossEntropyOp::kType);
}

void backward(const Operator&, const std::vector<const Tensor*>& inputs,
              const std::vector<Tensor*>& outputs, OpContext& context) {
  require_contiguous_gpu(SoftmaxCrossEntropyGradOp::kType, inputs, outputs);
  const int64_t rows = inputs[0]->shape()[0], classes = inputs[0]->shape()[1];
  if (rows * classes == 0) return;
  loss_grad<<<blocks_for(rows * classes), kThreads, 0, stream_of(context).stream()>>>(
      rows, classes, inputs[0]->data(), inputs[1]->data(), inputs[2]->data(),
      outputs[0]->mutable_data());
  PURINE_CUDA_LAUNCHED(SoftmaxCrossEntropyGradOp::kType);
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(SoftmaxCrossEntropyOp, forward);
PURINE_REGISTER_GPU_KERNEL(SoftmaxCrossEntropyGradOp, backward);

}  // namespace purine::cuda
