// GPU kernel of operators/accuracy.hpp: one thread per row decides whether the row is right (the
// CPU's rule: fewer than top_k scores strictly greater than the label's; a NaN score or an
// invalid label makes it wrong), then one thread counts the rows in order.
#include "operators/accuracy.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/elementwise_kernels.cuh"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

__global__ void rows_right(int64_t rows, int64_t classes, int64_t top_k, const float* scores,
                           const float* labels, int* right) {
  const int64_t n = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (n >= rows) return;
  const float value = labels[n];
  if (!(value >= 0.0f && value < float(classes) && value == floorf(value))) {
    right[n] = 0;
    return;
  }
  const float* row = scores + n * classes;
  const float target = row[int64_t(value)];
  bool nan = false;
  int64_t greater = 0;
  for (int64_t c = 0; c < classes; ++c) {
    nan |= isnan(row[c]);
    greater += row[c] > target ? 1 : 0;
  }
  right[n] = !nan && greater < top_k ? 1 : 0;
}

__global__ void fraction_right(int64_t rows, const int* right, float* accuracy) {
  int64_t count = 0;
  for (int64_t n = 0; n < rows; ++n) count += right[n];
  *accuracy = rows > 0 ? float(double(count) / rows) : 0.0f;
}

void accuracy(const Operator& op, const std::vector<const Tensor*>& inputs,
              const std::vector<Tensor*>& outputs, OpContext& context) {
  require_contiguous_gpu(AccuracyOp::kType, inputs, outputs);
  CudaStream& stream = stream_of(context);
  const int64_t rows = inputs[0]->shape()[0], classes = inputs[0]->shape()[1];
  const int64_t top_k = op.attrs().get_int("top_k", 1);
  int* right = static_cast<int*>(stream.workspace(std::max<int64_t>(rows, 1) * sizeof(int)));
  if (rows > 0) {
    rows_right<<<blocks_for(rows), kThreads, 0, stream.stream()>>>(
        rows, classes, top_k, inputs[0]->data(), inputs[1]->data(), right);
    PURINE_CUDA_LAUNCHED(AccuracyOp::kType);
  }
  fraction_right<<<1, 1, 0, stream.stream()>>>(rows, right, outputs[0]->mutable_data());
  PURINE_CUDA_LAUNCHED(AccuracyOp::kType);
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(AccuracyOp, accuracy);

}  // namespace purine::cuda
