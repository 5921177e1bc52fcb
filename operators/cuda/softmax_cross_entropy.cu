// GPU kernels of operators/softmax_cross_entropy.hpp. One warp per row computes the row's
// probabilities and loss with the CPU kernel's formulas (max and sum by warp shuffles); the row
// losses (doubles in the stream's workspace) are then averaged by one block in a fixed order
// (reduce.cuh's mean_of), so the loss is bit-identical run to run. The gradient is one warp per
// row too. Labels are not checked on the host (they live on the device): a row whose label is
// not an integer in [0, C) gets a NaN loss, which the trainer's divergence check reports (the
// data readers check labels when they load them).
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/elementwise_kernels.cuh"
#include "operators/cuda/reduce.cuh"
#include "operators/gpu_kernel.hpp"
#include "operators/softmax_cross_entropy.hpp"

namespace purine::cuda {

namespace {

// The label of a row, or -1 when it is no valid class index.
__device__ int64_t label_of(float value, int64_t classes) {
  return value >= 0.0f && value < float(classes) && value == floorf(value) ? int64_t(value) : -1;
}

// Warp warp_row() computes the probabilities of its row and the row's loss (the CPU's formula:
// log(sum) + max - x[label], in double), max and sum by warp shuffles.
__global__ void softmax_rows(int64_t rows, int64_t classes, const float* logits,
                             const float* labels, float* probs, double* row_loss) {
  const int64_t n = warp_row();
  if (n >= rows) return;  // the whole warp
  const int lane = threadIdx.x % kWarp;
  const float* x = logits + n * classes;
  const RowSoftmax row = warp_softmax_row(x, probs + n * classes, classes);
  if (lane == 0) {
    const int64_t label = label_of(labels[n], classes);
    row_loss[n] = label < 0 ? nan("") : log(double(row.sum)) + row.max - x[label];
  }
}

// dlogits of row warp_row(): scale probs - scale onehot(label), scale = dloss / N.
__global__ void loss_grad(int64_t rows, int64_t classes, const float* probs, const float* labels,
                          const float* dloss, float* dlogits) {
  const int64_t n = warp_row();
  if (n >= rows) return;
  const int lane = threadIdx.x % kWarp;
  const float scale = *dloss / float(rows);
  const int64_t label = label_of(labels[n], classes);
  const float* p = probs + n * classes;
  float* d = dlogits + n * classes;
  for (int64_t c = lane; c < classes; c += kWarp)
    d[c] = label < 0 ? nanf("") : scale * p[c] - (c == label ? scale : 0.0f);
}

void forward(const Operator&, const std::vector<const Tensor*>& inputs,
             const std::vector<Tensor*>& outputs, OpContext& context) {
  CudaStream& stream = stream_of(context);
  const int64_t rows = inputs[0]->shape()[0], classes = inputs[0]->shape()[1];
  double* row_loss = static_cast<double*>(stream.workspace(std::max<int64_t>(rows, 1) * 8));
  if (rows > 0) {
    softmax_rows<<<blocks_for_rows(rows), kThreads, 0, stream.stream()>>>(
        rows, classes, inputs[0]->data(), inputs[1]->data(), outputs[1]->mutable_data(), row_loss);
    PURINE_CUDA_LAUNCHED(SoftmaxCrossEntropyOp::kType);
  }
  mean_of<<<1, kThreads, 0, stream.stream()>>>(rows, row_loss, outputs[0]->mutable_data());
  PURINE_CUDA_LAUNCHED(SoftmaxCrossEntropyOp::kType);
}

void backward(const Operator&, const std::vector<const Tensor*>& inputs,
              const std::vector<Tensor*>& outputs, OpContext& context) {
  const int64_t rows = inputs[0]->shape()[0], classes = inputs[0]->shape()[1];
  if (rows * classes == 0) return;
  loss_grad<<<blocks_for_rows(rows), kThreads, 0, stream_of(context).stream()>>>(
      rows, classes, inputs[0]->data(), inputs[1]->data(), inputs[2]->data(),
      outputs[0]->mutable_data());
  PURINE_CUDA_LAUNCHED(SoftmaxCrossEntropyGradOp::kType);
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(SoftmaxCrossEntropyOp, forward);
PURINE_REGISTER_GPU_KERNEL(SoftmaxCrossEntropyGradOp, backward);

}  // namespace purine::cuda
