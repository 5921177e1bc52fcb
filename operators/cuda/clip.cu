// GPU kernels of operators/clip.hpp, with the CPU kernels' formulas: sum_squares adds x^2 in
// double with reduce_channels over x as one channel [1, 1, n] (fixed slices in a grid of blocks,
// partials in the stream's workspace, then the slices in order: bit-identical run to run);
// clip_scale adds the partial sums in input order; scale_by is element-wise. The results match
// the CPU's up to the rounding of the sums.
#include "operators/clip.hpp"
#include "operators/cuda/channel_kernels.cuh"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/elementwise_kernels.cuh"
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

// Up to kChunk partial sums per launch, added to `*total` (set, for the first chunk).
constexpr int kChunk = 128;
struct Partials {
  const float* at[kChunk];
  int count;
};

__global__ void add_partials(Partials partials, bool first, float* total) {
  double sum = first ? 0.0 : *total;
  for (int i = 0; i < partials.count; ++i) sum += *partials.at[i];
  *total = static_cast<float>(sum);
}

__global__ void scale_from_total(float* total, double max_norm) {
  *total = static_cast<float>(fmin(1.0, max_norm / (sqrt(double(*total)) + 1e-6)));
}

void clip_scale(const Operator& op, const std::vector<const Tensor*>& inputs,
                const std::vector<Tensor*>& outputs, OpContext& context) {
  cudaStream_t stream = stream_of(context).stream();
  float* total = outputs[0]->mutable_data();
  for (size_t start = 0; start < inputs.size(); start += kChunk) {
    Partials partials{};
    partials.count = static_cast<int>(std::min<size_t>(kChunk, inputs.size() - start));
    for (int i = 0; i < partials.count; ++i) partials.at[i] = inputs[start + i]->data();
    add_partials<<<1, 1, 0, stream>>>(partials, start == 0, total);
    PURINE_CUDA_LAUNCHED("clip_scale");
  }
  scale_from_total<<<1, 1, 0, stream>>>(total, static_cast<const ClipScaleOp&>(op).max_norm());
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
