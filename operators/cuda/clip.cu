// GPU kernels of operators/clip.hpp, with the CPU kernels' formulas: sum_squares adds x^2 in
// double with reduce_channels over x as one channel [1, 1, n] (fixed slices in a grid of blocks,
// partials in the stream's workspace, then the slices in order: bit-identical run to run);
// clip_scale adds the partial sums in input order in double and applies formula::ClipFactor, as
// the CPU kernel does; scale_by is element-wise. sum_squares matches the CPU's up to the order of
// its additions; clip_scale's factor is the CPU's bit for bit from the same sums.
#include "operators/clip.hpp"
#include "operators/cuda/channel_kernels.cuh"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/elementwise_kernels.cuh"
#include "operators/formulas.hpp"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

struct SquaresOf {
  const float* x;
  __device__ void operator()(int64_t, int64_t i, double (&acc)[1]) const {
    acc[0] += double(x[i]) * x[i];
  }
};

struct StoreTotal {
  float* out;
  __device__ void operator()(int64_t, const double (&total)[1]) const {
    *out = static_cast<float>(total[0]);
  }
};

void sum_squares(const Operator&, const std::vector<const Tensor*>& inputs,
                 const std::vector<Tensor*>& outputs, OpContext& context) {
  CudaStream& stream = stream_of(context);
  const ChannelLayout l{1, 1, inputs[0]->count()};
  double* partials = static_cast<double*>(stream.workspace(reduce_channels_bytes(1, l)));
  reduce_channels<1>("sum_squares", stream.stream(), l, partials, SquaresOf{inputs[0]->data()},
                     StoreTotal{outputs[0]->mutable_data()});
}

// Up to kChunk partial sums per launch, added in input order to a double running total in the
// stream's workspace (set by the first chunk), so that the total is the CPU kernel's to the bit.
constexpr int kChunk = 128;
struct Partials {
  const float* at[kChunk];
  int count;
};

__global__ void add_partials(Partials partials, bool first, double* running) {
  double sum = first ? 0.0 : *running;
  for (int i = 0; i < partials.count; ++i) sum += *partials.at[i];
  *running = sum;
}

__global__ void store_factor(const double* running, formula::ClipFactor factor, float* out) {
  *out = factor(*running);
}

void clip_scale(const Operator& op, const std::vector<const Tensor*>& inputs,
                const std::vector<Tensor*>& outputs, OpContext& context) {
  CudaStream& stream = stream_of(context);
  double* running = static_cast<double*>(stream.workspace(sizeof(double)));
  for (size_t start = 0; start < inputs.size(); start += kChunk) {
    Partials partials{};
    partials.count = static_cast<int>(std::min<size_t>(kChunk, inputs.size() - start));
    for (int i = 0; i < partials.count; ++i) partials.at[i] = inputs[start + i]->data();
    add_partials<<<1, 1, 0, stream.stream()>>>(partials, start == 0, running);
    PURINE_CUDA_LAUNCHED("clip_scale");
  }
  store_factor<<<1, 1, 0, stream.stream()>>>(
      running, formula::ClipFactor{static_cast<const ClipScaleOp&>(op).max_norm()},
      outputs[0]->mutable_data());
  PURINE_CUDA_LAUNCHED("clip_scale");
}

__global__ void scale_by_kernel(int64_t n, const float* x, const float* c, float* y) {
  const float factor = *c;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = factor * x[i];
}

void scale_by(const Operator&, const std::vector<const Tensor*>& inputs,
              const std::vector<Tensor*>& outputs, OpContext& context) {
  const int64_t n = inputs[0]->count();
  if (n == 0) return;
  scale_by_kernel<<<blocks_for(n), kThreads, 0, stream_of(context).stream()>>>(
      n, inputs[0]->data(), inputs[1]->data(), outputs[0]->mutable_data());
  PURINE_CUDA_LAUNCHED("scale_by");
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(SumSquaresOp, sum_squares);
PURINE_REGISTER_GPU_KERNEL(ClipScaleOp, clip_scale);
PURINE_REGISTER_GPU_KERNEL(ScaleByOp, scale_by);

}  // namespace purine::cuda
