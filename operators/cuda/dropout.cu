// GPU kernels of operators/dropout.hpp. The keep decisions come from the counter-based stream
// (operators/counter_rng.hpp) keyed by two draws of the op's generator, as on the CPU: the same
// masks as the CPU kernel's for the same generator, run after run. In a recording (a CUDA graph)
// the key is a launch word (base/device_queue.hpp): each replay draws it from the generator as a
// launch op by op would, so replayed training follows training launched op by op bit for bit.
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/elementwise_kernels.cuh"
#include "operators/dropout.hpp"
#include "operators/formulas.hpp"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

// The key is `*key_word` where that is set (a recording), else `key`.
__global__ void drop(int64_t n, const uint64_t* key_word, uint64_t key, formula::DropoutMask keep,
                     const float* x, float* y, float* mask) {
  if (key_word) key = *key_word;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float m = keep(key, uint64_t(i));
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

__global__ void keep_all(int64_t n, const float* x, float* y, float* mask) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    y[i] = x[i];
    mask[i] = 1.0f;
  }
}

struct Multiply {
  __device__ float operator()(float a, float b) const { return a * b; }
};

void forward(const Operator& op, const std::vector<const Tensor*>& inputs,
             const std::vector<Tensor*>& outputs, OpContext& context) {
  const auto& dropout = static_cast<const DropoutOp&>(op);
  const int64_t n = inputs[0]->count();
  const bool train = dropout.training();
  CudaStream& queue = stream_of(context);
  uint64_t key = 0;
  const uint64_t* key_word = nullptr;
  // Drawn even for an empty tensor, so the generator's sequence never depends on n.
  if (train) {
    if (LaunchWords* words = LaunchWords::recording()) {
      void* word = queue.launch_word(words->size());
      words->add({word, [rng = context.rng] { return draw_key(*rng); }});
      key_word = static_cast<const uint64_t*>(word);
    } else {
      key = draw_key(*context.rng);
    }
  }
  if (n == 0) return;
  const cudaStream_t stream = queue.stream();
  if (train) {
    const double ratio = dropout.ratio();
    drop<<<blocks_for(n), kThreads, 0, stream>>>(
        n, key_word, key, formula::DropoutMask{float(ratio), float(1.0 / (1.0 - ratio))},
        inputs[0]->data(), outputs[0]->mutable_data(), outputs[1]->mutable_data());
  } else {
    keep_all<<<blocks_for(n), kThreads, 0, stream>>>(
        n, inputs[0]->data(), outputs[0]->mutable_data(), outputs[1]->mutable_data());
  }
  PURINE_CUDA_LAUNCHED(DropoutOp::kType);
}

// (mask, dy) -> dx
void backward(const Operator&, const std::vector<const Tensor*>& inputs,
              const std::vector<Tensor*>& outputs, OpContext& context) {
  launch_map2(DropoutGradOp::kType, stream_of(context).stream(), *inputs[0], *inputs[1],
              *outputs[0], Multiply());
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(DropoutOp, forward);
PURINE_REGISTER_GPU_KERNEL(DropoutGradOp, backward);

}  // namespace purine::cuda
