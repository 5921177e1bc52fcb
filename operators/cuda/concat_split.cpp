// GPU kernels of operators/concat_split.hpp, and of reshape when the compile step could not
// make it a view: 2-D block copies on the op's stream. Cut along `axis`, a contiguous tensor is
// `outer` rows; each part holds extent * inner consecutive floats of every row.
#include "operators/concat_split.hpp"

#include <cuda_runtime.h>

#include "base/error.hpp"
#include "operators/cuda/cuda_check.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/gpu_kernel.hpp"
#include "operators/reshape.hpp"

namespace purine::cuda {

namespace {

// The op's axis counted from the front (compute() has checked its range).
int axis_of(int64_t axis, const Shape& whole) {
  return static_cast<int>(axis < 0 ? axis + whole.ndim() : axis);
}

// Copies part <-> whole: each of `outer` rows moves `part_row` floats between the part (rows of
// part_row floats) and the whole (rows of whole_row floats, the part at `offset`).
void copy_rows(const char* what, cudaStream_t stream, float* dst, int64_t dst_row, const float* src,
               int64_t src_row, int64_t part_row, int64_t outer) {
  if (part_row == 0 || outer == 0) return;
  PURINE_CUDA_CALL(
      what, cudaMemcpy2DAsync(dst, dst_row * sizeof(float), src, src_row * sizeof(float),
                              part_row * sizeof(float), outer, cudaMemcpyDeviceToDevice, stream));
}

void concat(const Operator& op, const std::vector<const Tensor*>& inputs,
            const std::vector<Tensor*>& outputs, OpContext& context) {
  const Shape& whole = outputs[0]->shape();
  const int axis = axis_of(static_cast<const ConcatOp&>(op).axis(), whole);
  const int64_t outer = whole.count_to(axis), inner = whole.count_from(axis + 1);
  const int64_t row = whole[axis] * inner;
  int64_t offset = 0;
  for (const Tensor* part : inputs) {
    const int64_t part_row = part->shape()[axis] * inner;
    copy_rows(ConcatOp::kType, stream_of(context).stream(), outputs[0]->mutable_data() + offset,
              row, part->data(), part_row, part_row, outer);
    offset += part_row;
  }
}

void split(const Operator& op, const std::vector<const Tensor*>& inputs,
           const std::vector<Tensor*>& outputs, OpContext& context) {
  const Shape& whole = inputs[0]->shape();
  const int axis = axis_of(static_cast<const SplitOp&>(op).axis(), whole);
  const int64_t outer = whole.count_to(axis), inner = whole.count_from(axis + 1);
  const int64_t row = whole[axis] * inner;
  int64_t offset = 0;
  for (Tensor* part : outputs) {
    const int64_t part_row = part->shape()[axis] * inner;
    copy_rows(SplitOp::kType, stream_of(context).stream(), part->mutable_data(), part_row,
              inputs[0]->data() + offset, row, part_row, outer);
    offset += part_row;
  }
}

void reshape(const Operator&, const std::vector<const Tensor*>& inputs,
             const std::vector<Tensor*>& outputs, OpContext& context) {
  if (inputs[0]->data() == outputs[0]->data() || inputs[0]->count() == 0) return;
  PURINE_CUDA_CALL(ReshapeOp::kType,
                   cudaMemcpyAsync(outputs[0]->mutable_data(), inputs[0]->data(),
                                   inputs[0]->count() * sizeof(float), cudaMemcpyDeviceToDevice,
                                   stream_of(context).stream()));
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(ConcatOp, concat);
PURINE_REGISTER_GPU_KERNEL(SplitOp, split);
PURINE_REGISTER_GPU_KERNEL(ReshapeOp, reshape);

}  // namespace purine::cuda
