// GPU side of operators/copy.hpp: host->device, device->host and device->device copies of one
// process, queued on the stream of the op's GPU end (the destination's, or the source's for a
// copy to the host). Between two devices a peer copy (the driver stages it when the devices
// cannot reach each other). Copies between ranks are the MPI halves of operators/mpi/copy.cpp.
#include "operators/copy.hpp"

#include <cuda_runtime.h>

#include "base/error.hpp"
#include "operators/cuda/cuda_check.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

void copy(const Operator&, const std::vector<const Tensor*>& inputs,
          const std::vector<Tensor*>& outputs, OpContext& context) {
  const Tensor& from = *inputs[0];
  Tensor& to = *outputs[0];
  const size_t bytes = static_cast<size_t>(from.count()) * sizeof(float);
  if (bytes == 0) return;
  const cudaStream_t stream = stream_of(context).stream();
  const Location a = from.location(), b = to.location();
  if (!a.is_cpu() && !b.is_cpu() && a.device != b.device) {
    PURINE_CUDA_CALL("copy", cudaMemcpyPeerAsync(to.mutable_data(), b.device, from.data(), a.device,
                                                 bytes, stream));
  } else {
    PURINE_CUDA_CALL(
        "copy", cudaMemcpyAsync(to.mutable_data(), from.data(), bytes, cudaMemcpyDefault, stream));
  }
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(CopyOp, copy);

}  // namespace purine::cuda
