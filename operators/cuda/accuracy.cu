// GPU kernel of operators/accuracy.hpp: one warp per row decides whether the row is right (the
// CPU's rule: fewer than top_k scores strictly greater than the label's; a NaN score or an
// invalid label makes it wrong), counting over its lanes with warp shuffles; then one block
// averages the rows' 0/1 (in the stream's workspace) with reduce.cuh's mean_of. The count is
// exact, so the fraction equals the CPU's.
#include "operators/accuracy.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/elementwise_kernels.cuh"
#include "operators/cuda/reduce.cuh"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

// Warp warp_row() decides its row: right[n] = 1 or 0 (a double, for mean_of). The label is the
// same on every lane, so an invalid one ends the whole warp.
__global__ void rows_right(int64_t rows, int64_t classes, int64_t top_k, const float* scores,
                           const float* labels, double* right) {
  const int64_t n = warp_row();
  if (n >= rows) return;
  const int lane = threadIdx.x % kWarp;
  const float value = labels[n];
  if (!(value >= 0.0f && value < float(classes) && value == floorf(value))) {
    if (lane == 0) right[n] = 0;
    return;
  }
  const float* row = scores + n * classes;
  const float target = row[int64_t(value)];
  bool nan = false;
  long long greater = 0;
  for (int64_t c = lane; c < classes; c += kWarp) {
    nan |= isnan(row[c]);
    greater += row[c] > target ? 1 : 0;
  }
  nan = __any_sync(kFullMask, nan);
  greater = warp_sum(greater);  // integers: exact in any order
  if (lane == 0) right[n] = !nan && greater < top_k ? 1.0 : 0.0;
}

void accuracy(const Operator& op, const std::vector<const Tensor*>& inputs,
              const std::vector<Tensor*>& outputs, OpContext& context) {
  CudaStream& stream = stream_of(context);
  const int64_t rows = inputs[0]->shape()[0], classes = inputs[0]->shape()[1];
  const int64_t top_k = static_cast<const AccuracyOp&>(op).top_k();
  double* right =
      static_cast<double*>(stream.workspace(std::max<int64_t>(rows, 1) * sizeof(double)));
  if (rows > 0) {
    rows_right<<<blocks_for_rows(rows), kThreads, 0, stream.stream()>>>(
        rows, classes, top_k, inputs[0]->data(), inputs[1]->data(), right);
    PURINE_CUDA_LAUNCHED(AccuracyOp::kType);
  }
  mean_of<<<1, kThreads, 0, stream.stream()>>>(rows, right, outputs[0]->mutable_data());
  PURINE_CUDA_LAUNCHED(AccuracyOp::kType);
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(AccuracyOp, accuracy);

}  // namespace purine::cuda
