// GPU side of the random fillers of operators/fill.hpp: the filler runs its CPU kernel into host
// memory, with the same generator, and the result is copied to the device on the op's stream.
// So a GPU tensor gets exactly the values the CPU one gets for the same seed, and the random
// number code exists once. They run when graphs are initialized, not in the training step;
// fill_constant, which does, has a kernel of its own (fill_constant.cu).
#include "operators/fill.hpp"

#include <cuda_runtime.h>

#include "base/error.hpp"
#include "operators/cuda/cuda_check.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

void fill_on_host_then_copy(const Operator& op, const std::vector<const Tensor*>& inputs,
                            const std::vector<Tensor*>& outputs, OpContext& context) {
  Tensor& out = *outputs[0];
  Tensor host(out.shape(), Location::cpu(out.location().rank));
  std::vector<Tensor*> host_outputs{&host};
  // Operators are immutable while they compute (operator.hpp); compute() is not const only
  // because subclasses may keep scratch buffers, which fillers do not.
  const_cast<Operator&>(op).compute(inputs, host_outputs, context);
  // From pageable memory the call returns once `host` is staged, so it may go out of scope.
  PURINE_CUDA_CALL(op.type().c_str(),
                   cudaMemcpyAsync(out.mutable_data(), host.data(), host.count() * sizeof(float),
                                   cudaMemcpyHostToDevice, stream_of(context).stream()));
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(FillUniformOp, fill_on_host_then_copy);
PURINE_REGISTER_GPU_KERNEL(FillGaussianOp, fill_on_host_then_copy);
PURINE_REGISTER_GPU_KERNEL(FillXavierOp, fill_on_host_then_copy);
PURINE_REGISTER_GPU_KERNEL(FillKaimingOp, fill_on_host_then_copy);

}  // namespace purine::cuda
