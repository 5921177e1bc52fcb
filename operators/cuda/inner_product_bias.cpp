// GPU kernel of operators/inner_product_bias.hpp: one cuBLASLt product whose epilogue adds the
// bias (CUBLASLT_EPILOGUE_BIAS) and applies the ReLU (CUBLASLT_EPILOGUE_RELU_BIAS). Row-major
// y [N, O] = x [N, K] w^T is, column-major, y^T [O, N] = op_T(w stored [K, O]) x^T (stored
// [K, N]); the bias is a vector over y^T's rows, which the epilogue broadcasts over its columns.
// The compute type follows GpuMath as the plain inner product's math mode does. The descriptors
// and the algorithm (cuBLASLt's heuristic) are made once per thread, geometry, math and operand
// alignment and kept; a call only sets the bias pointer. Where cuBLASLt offers no algorithm (or
// refuses the call, its compute type or epilogue), and for a bias less than 16-byte aligned, the
// op runs as the inner product's and the bias's kernels, logged with --v=1.
#include "operators/inner_product_bias.hpp"

#include <glog/logging.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "operators/cuda/cuda_check.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

constexpr char kWhat[] = "inner_product_bias";

// Owners of cuBLASLt's descriptors.
struct MatmulDesc {
  cublasLtMatmulDesc_t d = nullptr;
  MatmulDesc() = default;
  MatmulDesc(const MatmulDesc&) = delete;
  MatmulDesc& operator=(const MatmulDesc&) = delete;
  ~MatmulDesc() {
    if (d) (void)cublasLtMatmulDescDestroy(d);
  }
};
struct Layout {
  cublasLtMatrixLayout_t d = nullptr;
  Layout(int64_t rows, int64_t cols, int64_t ld) {
    PURINE_CUBLAS_CALL(
        kWhat, cublasLtMatrixLayoutCreate(&d, CUDA_R_32F, uint64_t(rows), uint64_t(cols), ld));
  }
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
  ~Layout() { (void)cublasLtMatrixLayoutDestroy(d); }
};
struct Preference {
  cublasLtMatmulPreference_t d = nullptr;
  Preference() { PURINE_CUBLAS_CALL(kWhat, cublasLtMatmulPreferenceCreate(&d)); }
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;
  ~Preference() { (void)cublasLtMatmulPreferenceDestroy(d); }
};

cublasComputeType_t compute_type(GpuMath math) {
  switch (math) {
    case GpuMath::kTf32:
      return CUBLAS_COMPUTE_32F_FAST_TF32;
    case GpuMath::kExact:
      return CUBLAS_COMPUTE_32F_PEDANTIC;
    case GpuMath::kFp32:
      break;
  }
  return CUBLAS_COMPUTE_32F;
}

// The largest power of two (up to 256) dividing the address: what the heuristic may assume.
uint32_t alignment(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 4 && address % a != 0) a /= 2;
  return a;
}

template <typename T>
void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  PURINE_CUBLAS_CALL(kWhat, cublasLtMatmulDescSetAttribute(d, attribute, &value, sizeof(value)));
}

// The descriptors and algorithm of one geometry (the column-major product of the header).
struct Plan {
  Plan(CudaStream& stream, int64_t n, int64_t o, int64_t k, bool relu, GpuMath math,
       const uint32_t (&aligned)[4], uint32_t bias_aligned)
      : a(k, o, k), b(k, n, k), y(o, n, o) {
    const auto run_apart = [&](const char* why) {
      VLOG(1) << kWhat << ": no cuBLASLt epilogue for [" << n << ", " << k << "] x [" << o << ", "
              << k << "]^T with its bias" << (relu ? " and ReLU" : "") << " (" << why
              << "); the product and the bias run apart";
    };
    // Other projects saw the bias epilogue fail on a bias less aligned than 16 bytes, and this
    // one's biases are allocations of their own; a view at an odd offset runs apart.
    if (bias_aligned < 16) {
      run_apart("the bias is not 16-byte aligned");
      return;
    }
    // A compute type or epilogue this cuBLASLt does not know is no error: the op runs apart.
    const cublasStatus_t created =
        cublasLtMatmulDescCreate(&desc.d, compute_type(math), CUDA_R_32F);
    if (created != CUBLAS_STATUS_SUCCESS) {
      run_apart(cublas_status_name(created));
      return;
    }
    const cublasLtEpilogue_t epilogue = relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    const cublasStatus_t with_epilogue = cublasLtMatmulDescSetAttribute(
        desc.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue));
    if (with_epilogue != CUBLAS_STATUS_SUCCESS) {
      run_apart(cublas_status_name(with_epilogue));
      return;
    }
    set(desc.d, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
    set(desc.d, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
    size_t workspace_bytes = 0;
    stream.cublas_workspace(&workspace_bytes);
    Preference pref;
    const uint64_t max_workspace = workspace_bytes;
    PURINE_CUBLAS_CALL(kWhat, cublasLtMatmulPreferenceSetAttribute(
                                  pref.d, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace,
                                  sizeof(max_workspace)));
    const cublasLtMatmulPreferenceAttributes_t minimum[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i)
      PURINE_CUBLAS_CALL(kWhat, cublasLtMatmulPreferenceSetAttribute(
                                    pref.d, minimum[i], &aligned[i], sizeof(aligned[i])));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        stream.cublas_lt(), desc.d, a.d, b.d, y.d, y.d, pref.d, 1, &result, &found);
    fused = status == CUBLAS_STATUS_SUCCESS && found > 0;
    if (fused) {
      algo = result.algo;
    } else {
      run_apart(status == CUBLAS_STATUS_SUCCESS ? "no algorithm" : cublas_status_name(status));
    }
  }
  MatmulDesc desc;
  Layout a, b, y;
  bool fused = false;  // false: run unfused
  cublasLtMatmulAlgo_t algo{};
};

using Key = std::tuple<int64_t, int64_t, int64_t, bool, GpuMath, uint32_t, uint32_t, uint32_t,
                       uint32_t, int>;  // n, o, k, relu, math, alignments of x, w, y, b, device

// The plan, made on this thread's first call with its key and kept: per thread, so no lock, and
// the bias pointer each call sets on its descriptor is this thread's alone.
Plan& plan_for(CudaStream& stream, int64_t n, int64_t o, int64_t k, bool relu, GpuMath math,
               const float* x, const float* w, const float* y, const float* b) {
  thread_local std::map<Key, std::unique_ptr<Plan>> cache;
  const Key key{
      n, o, k, relu, math, alignment(x), alignment(w), alignment(y), alignment(b), stream.device()};
  std::unique_ptr<Plan>& slot = cache[key];
  if (!slot) {
    // What the heuristic may assume of the operands A (w), B (x), C and D (y).
    const uint32_t aligned[4] = {alignment(w), alignment(x), alignment(y), alignment(y)};
    slot = std::make_unique<Plan>(stream, n, o, k, relu, math, aligned, alignment(b));
  }
  return *slot;
}

// The unfused kernels: the product, then the bias (and ReLU) in place.
void unfused(const Operator& op, bool relu, const std::vector<const Tensor*>& inputs,
             const std::vector<Tensor*>& outputs, OpContext& context) {
  GpuKernels::find("inner_product")(op, {inputs[0], inputs[1]}, outputs, context);
  GpuKernels::find(relu ? "bias_relu" : "bias")(op, {outputs[0], inputs[2]}, outputs, context);
}

void forward(const Operator& op, const std::vector<const Tensor*>& inputs,
             const std::vector<Tensor*>& outputs, OpContext& context) {
  const bool relu = static_cast<const InnerProductBiasOp&>(op).relu();
  const int64_t n = inputs[0]->shape()[0], o = inputs[1]->shape()[0], k = inputs[1]->shape()[1];
  if (n == 0 || o == 0) return;
  if (k == 0) return unfused(op, relu, inputs, outputs, context);
  CudaStream& stream = stream_of(context);
  const float* x = inputs[0]->data();
  const float* w = inputs[1]->data();
  const float* b = inputs[2]->data();
  float* y = outputs[0]->mutable_data();
  const GpuMath math = gpu_math();

  Plan& plan = plan_for(stream, n, o, k, relu, math, x, w, y, b);
  if (plan.fused) {
    set(plan.desc.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(b));
    size_t workspace_bytes = 0;
    void* workspace = stream.cublas_workspace(&workspace_bytes);
    const float one = 1.0f, zero = 0.0f;
    const cublasStatus_t status = cublasLtMatmul(
        stream.cublas_lt(), plan.desc.d, &one, w, plan.a.d, x, plan.b.d, &zero, y, plan.y.d, y,
        plan.y.d, &plan.algo, workspace, workspace_bytes, stream.stream());
    if (status == CUBLAS_STATUS_SUCCESS) return;
    if (status != CUBLAS_STATUS_NOT_SUPPORTED)
      throw_cuda_error("cublasLtMatmul", cublas_status_name(status), kWhat);
    plan.fused = false;
    VLOG(1) << kWhat << ": cuBLASLt refused its chosen algorithm; the product and the bias run "
            << "apart";
  }
  unfused(op, relu, inputs, outputs, context);
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(InnerProductBiasOp, forward);

}  // namespace purine::cuda
