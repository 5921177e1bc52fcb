// GPU kernels of operators/pool.hpp through cuDNN: max pooling in cuDNN's deterministic mode,
// average pooling dividing by the whole window, padding included (as the CPU kernel). Pooling
// acts on each plane alone, so the N x C planes are handed to cuDNN as N*C images of 1 channel.
#include "operators/cuda/cuda_check.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/cudnn_descriptors.hpp"
#include "operators/cuda/contiguity.hpp"
#include "operators/gpu_kernel.hpp"
#include "operators/pool.hpp"

namespace purine::cuda {

namespace {

struct PoolDescriptors {
  explicit PoolDescriptors(const PoolGeometry& g)
      : x(g.planes, 1, g.h, g.w),
        y(g.planes, 1, g.ho, g.wo),
        pool(g.max ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
             g.kernel_h, g.kernel_w, g.pad_h, g.pad_w, g.stride_h, g.stride_w) {}
  TensorDesc x, y;
  PoolDesc pool;
};

void forward(const Operator& op, const std::vector<const Tensor*>& inputs,
             const std::vector<Tensor*>& outputs, OpContext& context) {
  require_contiguous_gpu(PoolOp::kType, inputs, outputs);
  const PoolGeometry g = static_cast<const PoolOpBase&>(op).geometry(inputs[0]->shape());
  if (g.planes == 0) return;
  const PoolDescriptors d(g);
  const float one = 1.0f, zero = 0.0f;
  PURINE_CUDNN_CALL(PoolOp::kType,
                    cudnnPoolingForward(stream_of(context).cudnn(), d.pool.get(), &one, d.x.get(),
                                        inputs[0]->data(), &zero, d.y.get(),
                                        outputs[0]->mutable_data()));
}

// (x, y, dy) -> dx
void backward(const Operator& op, const std::vector<const Tensor*>& inputs,
              const std::vector<Tensor*>& outputs, OpContext& context) {
  require_contiguous_gpu(PoolGradOp::kType, inputs, outputs);
  const PoolGeometry g = static_cast<const PoolOpBase&>(op).geometry(inputs[0]->shape());
  if (g.planes == 0) return;
  const PoolDescriptors d(g);
  const float one = 1.0f, zero = 0.0f;
  PURINE_CUDNN_CALL(PoolGradOp::kType,
                    cudnnPoolingBackward(stream_of(context).cudnn(), d.pool.get(), &one,
                                         d.y.get(), inputs[1]->data(), d.y.get(),
                                         inputs[2]->data(), d.x.get(), inputs[0]->data(), &zero,
                                         d.x.get(), outputs[0]->mutable_data()));
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(PoolOp, forward);
PURINE_REGISTER_GPU_KERNEL(PoolGradOp, backward);

}  // namespace purine::cuda
