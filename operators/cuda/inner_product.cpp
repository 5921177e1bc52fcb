// GPU kernels of operators/inner_product.hpp through cuBLAS, in the math of GpuMath
// (operators/gpu_kernel.hpp: cublas_math below), set on the handle before each product.
// Tensors are row-major; cuBLAS is column-major, so each product C = op(A) op(B) is computed as C^T
// = op(B)^T op(A)^T, which reads the same memory.
#include "operators/inner_product.hpp"

#include "operators/cuda/cuda_check.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

// kFp32: cuBLAS's default math, float32 throughout as PyTorch with allow_tf32 off (its kernels
// may split a product's sum); kExact: pedantic math, cuBLAS's reference arithmetic for parity
// runs; kTf32: TF32 tensor cores.
cublasMath_t cublas_math(GpuMath math) {
  switch (math) {
    case GpuMath::kTf32:
      return CUBLAS_TF32_TENSOR_OP_MATH;
    case GpuMath::kExact:
      return CUBLAS_PEDANTIC_MATH;
    case GpuMath::kFp32:
      break;
  }
  return CUBLAS_DEFAULT_MATH;
}

// Row-major C [m, n] = op(A) [m, k] op(B) [k, n] with leading dimensions lda, ldb, ldc.
void gemm(const char* what, CudaStream& stream, bool trans_a, bool trans_b, int64_t m, int64_t n,
          int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
          int64_t ldc) {
  if (m == 0 || n == 0) return;
  const float one = 1.0f, zero = 0.0f;
  PURINE_CUBLAS_CALL(what, cublasSetMathMode(stream.cublas(), cublas_math(gpu_math())));
  PURINE_CUBLAS_CALL(what, cublasSgemm(stream.cublas(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                       trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, int(n), int(m), int(k),
                                       &one, b, int(ldb), a, int(lda), &zero, c, int(ldc)));
}

void forward(const Operator&, const std::vector<const Tensor*>& inputs,
             const std::vector<Tensor*>& outputs, OpContext& context) {
  const int64_t n = inputs[0]->shape()[0], o = inputs[1]->shape()[0], k = inputs[1]->shape()[1];
  // y [N, O] = x [N, K] w^T
  gemm(InnerProductOp::kType, stream_of(context), false, true, n, o, k, inputs[0]->data(), k,
       inputs[1]->data(), k, outputs[0]->mutable_data(), o);
}

void grad_data(const Operator&, const std::vector<const Tensor*>& inputs,
               const std::vector<Tensor*>& outputs, OpContext& context) {
  const int64_t n = inputs[0]->shape()[0], o = inputs[1]->shape()[0], k = inputs[1]->shape()[1];
  // dx [N, K] = dy [N, O] w [O, K]
  gemm(InnerProductGradDataOp::kType, stream_of(context), false, false, n, k, o, inputs[0]->data(),
       o, inputs[1]->data(), k, outputs[0]->mutable_data(), k);
}

void grad_weight(const Operator&, const std::vector<const Tensor*>& inputs,
                 const std::vector<Tensor*>& outputs, OpContext& context) {
  const int64_t n = inputs[0]->shape()[0], o = inputs[0]->shape()[1];
  const int64_t k = outputs[0]->shape()[1];
  // dw [O, K] = dy^T [O, N] x [N, K]
  gemm(InnerProductGradWeightOp::kType, stream_of(context), true, false, o, k, n, inputs[0]->data(),
       o, inputs[1]->data(), k, outputs[0]->mutable_data(), k);
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(InnerProductOp, forward);
PURINE_REGISTER_GPU_KERNEL(InnerProductGradDataOp, grad_data);
PURINE_REGISTER_GPU_KERNEL(InnerProductGradWeightOp, grad_weight);

}  // namespace purine::cuda
