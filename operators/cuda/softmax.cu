// GPU kernels of operators/softmax.hpp: the tensor is read as [outer, C, inner] around the
// softmax axis. For the softmax over contiguous rows (inner == 1, e.g. logits [N, C]) one warp
// handles a row: lanes take every 32nd value, the row's max and sum (or dot product) come from
// warp shuffles in a fixed order. Otherwise (a softmax across the channels of a feature map) one
// thread per (outer, inner) position walks its C values, max first, as the CPU kernel does:
// adjacent threads read adjacent positions, so the loads are coalesced.
#include "base/error.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/elementwise_kernels.cuh"
#include "operators/cuda/reduce.cuh"
#include "operators/gpu_kernel.hpp"
#include "operators/softmax.hpp"

namespace purine::cuda {

namespace {

struct Layout {
  int64_t outer, classes, inner;
};

// The [outer, C, inner] view of `shape` around `axis` (its range checked by output_shapes()).
Layout layout_of(int64_t axis, const Shape& shape) {
  if (axis < 0) axis += shape.ndim();
  Layout l{1, shape[static_cast<int>(axis)], 1};
  for (int d = 0; d < axis; ++d) l.outer *= shape[d];
  for (int d = static_cast<int>(axis) + 1; d < shape.ndim(); ++d) l.inner *= shape[d];
  return l;
}

// inner == 1: warp_row() is the row.
__global__ void softmax_rows(int64_t rows, int64_t classes, const float* x, float* y) {
  const int64_t row = warp_row();
  if (row >= rows) return;  // the whole warp
  warp_softmax_row(x + row * classes, y + row * classes, classes);
}

__global__ void softmax_grad_rows(int64_t rows, int64_t classes, const float* y, const float* dy,
                                  float* dx) {
  const int64_t row = warp_row();
  if (row >= rows) return;
  const int lane = threadIdx.x % kWarp;
  const int64_t base = row * classes;
  float dot = 0.0f;
  for (int64_t c = lane; c < classes; c += kWarp) dot += dy[base + c] * y[base + c];
  dot = warp_sum(dot);
  for (int64_t c = lane; c < classes; c += kWarp) dx[base + c] = y[base + c] * (dy[base + c] - dot);
}

// inner > 1: a grid-stride loop over the outer * inner positions (one division per position,
// which then walks its C values).
__global__ void softmax_forward(Layout l, const float* x, float* y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < l.outer * l.inner;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = i / l.inner * l.classes * l.inner + i % l.inner;
    float max = x[base];
    for (int64_t c = 1; c < l.classes; ++c) max = fmaxf(max, x[base + c * l.inner]);
    float sum = 0.0f;
    for (int64_t c = 0; c < l.classes; ++c) {
      const float e = expf(x[base + c * l.inner] - max);
      y[base + c * l.inner] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
    for (int64_t c = 0; c < l.classes; ++c) y[base + c * l.inner] *= inv;
  }
}

__global__ void softmax_backward(Layout l, const float* y, const float* dy, float* dx) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < l.outer * l.inner;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = i / l.inner * l.classes * l.inner + i % l.inner;
    float dot = 0.0f;
    for (int64_t c = 0; c < l.classes; ++c) dot += dy[base + c * l.inner] * y[base + c * l.inner];
    for (int64_t c = 0; c < l.classes; ++c) {
      const int64_t at = base + c * l.inner;
      dx[at] = y[at] * (dy[at] - dot);
    }
  }
}

void forward(const Operator& op, const std::vector<const Tensor*>& inputs,
             const std::vector<Tensor*>& outputs, OpContext& context) {
  const Layout l = layout_of(static_cast<const SoftmaxOp&>(op).axis(), inputs[0]->shape());
  if (l.outer * l.inner * l.classes == 0) return;
  if (l.inner == 1) {
    softmax_rows<<<blocks_for_rows(l.outer), kThreads, 0, stream_of(context).stream()>>>(
        l.outer, l.classes, inputs[0]->data(), outputs[0]->mutable_data());
    PURINE_CUDA_LAUNCHED(SoftmaxOp::kType);
    return;
  }
  softmax_forward<<<blocks_for(l.outer * l.inner), kThreads, 0, stream_of(context).stream()>>>(
      l, inputs[0]->data(), outputs[0]->mutable_data());
  PURINE_CUDA_LAUNCHED(SoftmaxOp::kType);
}

void backward(const Operator& op, const std::vector<const Tensor*>& inputs,
              const std::vector<Tensor*>& outputs, OpContext& context) {
  const Layout l = layout_of(static_cast<const SoftmaxGradOp&>(op).axis(), inputs[0]->shape());
  if (l.outer * l.inner * l.classes == 0) return;
  if (l.inner == 1) {
    softmax_grad_rows<<<blocks_for_rows(l.outer), kThreads, 0, stream_of(context).stream()>>>(
        l.outer, l.classes, inputs[0]->data(), inputs[1]->data(), outputs[0]->mutable_data());
    PURINE_CUDA_LAUNCHED(SoftmaxGradOp::kType);
    return;
  }
  softmax_backward<<<blocks_for(l.outer * l.inner), kThreads, 0, stream_of(context).stream()>>>(
      l, inputs[0]->data(), inputs[1]->data(), outputs[0]->mutable_data());
  PURINE_CUDA_LAUNCHED(SoftmaxGradOp::kType);
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(SoftmaxOp, forward);
PURINE_REGISTER_GPU_KERNEL(SoftmaxGradOp, backward);

}  // namespace purine::cuda
