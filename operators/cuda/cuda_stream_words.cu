// CudaStream::write_word (cuda_stream.hpp): a launch word's value goes to the device as the
// argument of a one-thread kernel, which the stream runs in its order. A copy from host memory
// would read the host memory when the stream gets to it (pinned) or wait for the stream
// (pageable), and the host writes the next launch's words while the last launch may still run.
#include "operators/cuda/cuda_check.hpp"
#include "operators/cuda/cuda_stream.hpp"

namespace purine::cuda {

namespace {

__global__ void store_word(uint64_t* word, uint64_t value) { *word = value; }

}  // namespace

void CudaStream::write_word(void* device_word, uint64_t value) {
  store_word<<<1, 1, 0, stream_>>>(static_cast<uint64_t*>(device_word), value);
  PURINE_CUDA_CALL("launch word", cudaGetLastError());
}

}  // namespace purine::cuda
