// GPU kernel of operators/finite.hpp. The count is an integer, so atomic additions give the same
// result in any order: the output's four bytes hold an unsigned counter while the inputs are
// counted (up to kChunk inputs per launch, one grid row each, warp sums then one atomic per
// warp), and a last one-thread kernel turns it into the float the operator promises.
#include <cuda_runtime.h>

#include <algorithm>

#include "operators/cuda/cuda_check.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/launch.hpp"
#include "operators/finite.hpp"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

constexpr int kChunk = 32;
constexpr int kMaxBlocksPerInput = 256;

struct Inputs {
  const float* at[kChunk];
  int64_t count[kChunk];
};

__global__ void count_non_finite_kernel(Inputs inputs, unsigned* counter) {
  const float* x = inputs.at[blockIdx.y];
  const int64_t n = inputs.count[blockIdx.y];
  unsigned count = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    count += (__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u;
  count = __reduce_add_sync(0xffffffffu, count);
  if ((threadIdx.x & 31) == 0 && count > 0) atomicAdd(counter, count);
}

__global__ void counter_to_float(unsigned* counter) {
  const unsigned count = *counter;
  *reinterpret_cast<float*>(counter) = static_cast<float>(count);
}

void count_non_finite(const Operator&, const std::vector<const Tensor*>& inputs,
                      const std::vector<Tensor*>& outputs, OpContext& context) {
  const cudaStream_t stream = stream_of(context).stream();
  unsigned* counter = reinterpret_cast<unsigned*>(outputs[0]->mutable_data());
  PURINE_CUDA_CALL(CountNonFiniteOp::kType, cudaMemsetAsync(counter, 0, sizeof *counter, stream));
  for (size_t first = 0; first < inputs.size(); first += kChunk) {
    Inputs chunk{};
    int64_t largest = 0;
    const int rows = static_cast<int>(std::min<size_t>(kChunk, inputs.size() - first));
    for (int k = 0; k < rows; ++k) {
      chunk.at[k] = inputs[first + k]->data();
      chunk.count[k] = inputs[first + k]->count();
      largest = std::max(largest, chunk.count[k]);
    }
    const dim3 grid(std::min(blocks_for(largest), kMaxBlocksPerInput), rows);
    count_non_finite_kernel<<<grid, kThreads, 0, stream>>>(chunk, counter);
    PURINE_CUDA_LAUNCHED(CountNonFiniteOp::kType);
  }
  counter_to_float<<<1, 1, 0, stream>>>(counter);
  PURINE_CUDA_LAUNCHED(CountNonFiniteOp::kType);
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(CountNonFiniteOp, count_non_finite);

}  // namespace purine::cuda
