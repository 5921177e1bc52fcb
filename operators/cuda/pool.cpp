// GPU kernels of operators/pool.hpp. Max pooling runs this backend's own kernels (max_pool.cu):
// the CPU kernel's results bit for bit (ties go to the first maximum of a window, also in the
// gradient), deterministic, and several times faster than cuDNN's deterministic max mode for
// the backward pass. Average pooling goes through cuDNN, dividing by the whole window, padding
// included (as the CPU kernel). The tensors are described to cuDNN as what they are, NCHW
// [N, C, H, W] (cuDNN refuses a batch dimension of 65,536 or more, so N * C planes as images of
// one channel would fail for large batches). The descriptors are made once per geometry on each
// executor thread and kept.
#include "operators/pool.hpp"

#include <array>
#include <map>
#include <memory>

#include "operators/cuda/cuda_check.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/cudnn_descriptors.hpp"
#include "operators/cuda/max_pool.hpp"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

// Everything a pooling's descriptors depend on: x's N, C, H, W, then the geometry's window.
using PoolKey = std::array<int64_t, 13>;

struct PoolDescriptors {
  PoolDescriptors(const PoolGeometry& g, int64_t n, int64_t c)
      : x(n, c, g.h, g.w),
        y(n, c, g.ho, g.wo),
        pool(CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, g.kernel_h, g.kernel_w, g.pad_h, g.pad_w,
             g.stride_h, g.stride_w) {}
  TensorDesc x, y;
  PoolDesc pool;
};

// The descriptors of pooling `x` with geometry `g`, made on this thread's first call with them.
// Per thread, so no lock: each executor thread drives its own streams. A network has a few
// pooling shapes, so the map stays small.
const PoolDescriptors& descriptors_for(const PoolGeometry& g, const Shape& x) {
  thread_local std::map<PoolKey, std::unique_ptr<PoolDescriptors>> cache;
  const PoolKey key{g.max ? 1 : 0, x[0],       x[1],    g.h,     g.w,        g.ho,      g.wo,
                    g.kernel_h,    g.kernel_w, g.pad_h, g.pad_w, g.stride_h, g.stride_w};
  std::unique_ptr<PoolDescriptors>& slot = cache[key];
  if (!slot) slot = std::make_unique<PoolDescriptors>(g, x[0], x[1]);
  return *slot;
}

void forward(const Operator& op, const std::vector<const Tensor*>& inputs,
             const std::vector<Tensor*>& outputs, OpContext& context) {
  const Shape& shape = inputs[0]->shape();
  const PoolGeometry g = static_cast<const PoolOpBase&>(op).geometry(shape);
  if (g.planes == 0) return;
  if (g.max) {
    max_pool_forward(PoolOp::kType, g, inputs[0]->data(), outputs[0]->mutable_data(),
                     stream_of(context).stream());
    return;
  }
  const PoolDescriptors& d = descriptors_for(g, shape);
  const float one = 1.0f, zero = 0.0f;
  PURINE_CUDNN_CALL(PoolOp::kType, cudnnPoolingForward(stream_of(context).cudnn(), d.pool.get(),
                                                       &one, d.x.get(), inputs[0]->data(), &zero,
                                                       d.y.get(), outputs[0]->mutable_data()));
}

// (x, y, dy) -> dx
void backward(const Operator& op, const std::vector<const Tensor*>& inputs,
              const std::vector<Tensor*>& outputs, OpContext& context) {
  const Shape& shape = inputs[0]->shape();
  const PoolGeometry g = static_cast<const PoolOpBase&>(op).geometry(shape);
  if (g.planes == 0) return;
  if (g.max) {  // y (input 1) is not read: the maxima are found again in x, as on the CPU
    max_pool_backward(PoolGradOp::kType, g, inputs[0]->data(), inputs[2]->data(),
                      outputs[0]->mutable_data(), stream_of(context).stream());
    return;
  }
  const PoolDescriptors& d = descriptors_for(g, shape);
  const float one = 1.0f, zero = 0.0f;
  PURINE_CUDNN_CALL(
      PoolGradOp::kType,
      cudnnPoolingBackward(stream_of(context).cudnn(), d.pool.get(), &one, d.y.get(),
                           inputs[1]->data(), d.y.get(), inputs[2]->data(), d.x.get(),
                           inputs[0]->data(), &zero, d.x.get(), outputs[0]->mutable_data()));
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(PoolOp, forward);
PURINE_REGISTER_GPU_KERNEL(PoolGradOp, backward);

}  // namespace purine::cuda
