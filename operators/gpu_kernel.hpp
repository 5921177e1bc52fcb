// GPU kernels are registered by operator type, beside the CPU ones: operators/cuda/<name>.cu
// holds the kernel of operators/<name>.hpp and registers it with one line,
//   PURINE_REGISTER_GPU_KERNEL(ReluOp, relu_gpu);
// (the kernel in namespace purine::cuda for the backend's own).
// Operator::compute() calls it for an op whose outputs are on a GPU (or, for an op that bridges
// locations, whose input is), on the thread of that GPU location's device executor: the kernel
// puts its work on context.queue (the location's stream) and returns without waiting for it.
// Without the CUDA backend none is registered, and such an op is a purine::Error naming it.
// The backend registers its kernels while it loads, which the first lookup triggers
// (base/device_runtime.hpp); lookups are thread-safe.
#pragma once

#include <string>
#include <vector>

#include "operators/operator.hpp"

namespace purine {

// `op` is the operator the kernel was registered for (its attributes: op.attrs()).
using GpuKernel = void (*)(const Operator& op, const std::vector<const Tensor*>& inputs,
                           const std::vector<Tensor*>& outputs, OpContext& context);

// Set-up a GPU kernel needs once per op before the first run (an NCCL communicator): called by
// Operator::prepare(), i.e. by the compile step, on every rank in the graph's order.
using GpuPrepare = void (*)(const Operator& op, const std::vector<const Tensor*>& inputs,
                            const std::vector<Tensor*>& outputs, const OpContext& context);

// The arithmetic of the GPU's matrix kernels (convolutions, inner products) on float32 data:
// kFp32, the default, multiplies in full float32 (FMA) but lets cuDNN compute a convolution by
// non-fused Winograd where that is faster, and cuBLAS use its default math, as PyTorch does with
// TF32 off: Winograd's rounding is coarser (norm-wise up to 1.7e-3 from the CPU on 5x5
// geometries, seen on an H200); kExact, the CPU-parity reference, leaves Winograd out and runs
// cuBLAS in its pedantic math, so convolutions agree with the CPU to float rounding; kTf32 lets
// cuDNN and cuBLAS round the operands to TF32 on the tensor cores (PyTorch's allow_tf32), faster on
// Ampere and later GPUs and about 1e-3 from FP32. Process-wide: set it before the first run of a
// graph (the kernels choose their algorithms on first use).
enum class GpuMath { kFp32, kTf32, kExact };
void set_gpu_math(GpuMath math);
GpuMath gpu_math();

class GpuKernels {
 public:
  static bool add(const std::string& type, GpuKernel kernel, GpuPrepare prepare = nullptr);
  // The kernel of `type`, or null.
  static GpuKernel find(const std::string& type);
  // Its set-up, or null (none registered, or no kernel).
  static GpuPrepare find_prepare(const std::string& type);
  static std::vector<std::string> types();
};

}  // namespace purine

// The kernel may be a template instance (forward<Relu>): the variable is named by line.
#define PURINE_GPU_KERNEL_CONCAT2(a, b) a##b
#define PURINE_GPU_KERNEL_CONCAT(a, b) PURINE_GPU_KERNEL_CONCAT2(a, b)
#define PURINE_REGISTER_GPU_KERNEL(Class, ...)                                          \
  static const bool PURINE_GPU_KERNEL_CONCAT(purine_gpu_kernel_registered_, __LINE__) = \
      ::purine::GpuKernels::add(Class::kType, __VA_ARGS__)
