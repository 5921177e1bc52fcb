// GPU kernels of operators/conv.hpp through cuDNN: FP32 cross-correlation with FMA math (TF32
// tensor cores only under GpuMath::kTf32, non-fused Winograd not under kExact), the algorithm timed
// once per geometry within a workspace limit and cached (conv_algorithms.hpp), deterministic ones
// unless the op's `deterministic` attribute is 0 (the attribute of conv_grad_weight's CPU kernel;
// here it applies to all three directions). The descriptors and the algorithm are made once per
// (device, direction, geometry) on each executor thread and kept, so a call costs a map lookup on
// the host. conv_bias_relu's forward is cudnnConvolutionBiasActivationForward with the forward
// algorithm conv would use (its bias and ReLU in the convolution's epilogue); should cuDNN refuse
// that combination, the plan remembers it and runs the convolution, cudnnAddTensor and
// cudnnActivationForward instead.
#include "operators/conv.hpp"

#include <glog/logging.h>

#include <array>
#include <map>
#include <memory>

#include "operators/cuda/conv_algorithms.hpp"
#include "operators/cuda/cuda_check.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/cudnn_descriptors.hpp"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

struct Descriptors {
  explicit Descriptors(const ConvGeometry& g)
      : x(g.n, g.c, g.h, g.w),
        w(g.o, g.c, g.kh, g.kw),
        y(g.n, g.o, g.ho, g.wo),
        bias(1, g.o, 1, 1),
        conv(g.pad_h, g.pad_w, g.stride_h, g.stride_w),
        relu(CUDNN_ACTIVATION_RELU) {}
  TensorDesc x;
  FilterDesc w;
  TensorDesc y;
  TensorDesc bias;  // conv_bias_relu's
  ConvDesc conv;
  ActivationDesc relu;  // conv_bias_relu's
};

// What one direction of one geometry needs per call: its descriptors and algorithm.
struct Plan {
  Plan(const ConvGeometry& g, CudaStream& stream, ConvDirection direction, bool deterministic,
       GpuMath math, int forced)
      : d(g) {
    // Tensor-core algorithms are timed only when TF32 is allowed; the one chosen sets the math.
    const bool tensor_ops = math == GpuMath::kTf32;
    if (tensor_ops) d.conv.set_math(CUDNN_TENSOR_OP_MATH);
    algo = forced >= 0
               ? forced_conv_algorithm(stream.cudnn(), direction, forced, tensor_ops, d.x.get(),
                                       d.w.get(), d.conv.get(), d.y.get())
               : choose_conv_algorithm(stream.cudnn(), stream.device(), direction, g, deterministic,
                                       math, d.x.get(), d.w.get(), d.conv.get(), d.y.get());
    d.conv.set_math(algo.math);
  }
  Descriptors d;
  ConvAlgorithm algo;
  // conv_bias_relu: cudnnConvolutionBiasActivationForward refused the algorithm; run three calls.
  bool unfused = false;
};

using PlanKey = std::array<int64_t, 17>;

// The plan, made on this thread's first call with its key and kept: per thread, so no lock (each
// executor thread drives its own streams); a network has a few convolution shapes.
Plan& plan_for(const ConvGeometry& g, CudaStream& stream, ConvDirection direction,
               bool deterministic, int forced) {
  thread_local std::map<PlanKey, std::unique_ptr<Plan>> cache;
  const GpuMath math = gpu_math();
  const PlanKey key{stream.device(),
                    static_cast<int64_t>(direction),
                    (deterministic ? 1 : 0) + 2 * static_cast<int64_t>(math),
                    g.n,
                    g.c,
                    g.h,
                    g.w,
                    g.o,
                    g.kh,
                    g.kw,
                    g.ho,
                    g.wo,
                    g.stride_h,
                    g.stride_w,
                    g.pad_h,
                    g.pad_w,
                    forced};
  std::unique_ptr<Plan>& slot = cache[key];
  if (!slot) slot = std::make_unique<Plan>(g, stream, direction, deterministic, math, forced);
  return *slot;
}

// y = max(conv(x, w) + b, 0) for conv_bias_relu (x, w, b) -> y, by the plan's forward algorithm.
void fused_forward(const char* what, CudaStream& stream, Plan& plan, void* workspace,
                   const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs) {
  const Descriptors& d = plan.d;
  const ConvAlgorithm& algo = plan.algo;
  const float one = 1.0f, zero = 0.0f;
  float* y = outputs[0]->mutable_data();
  const auto fwd_algo = static_cast<cudnnConvolutionFwdAlgo_t>(algo.algo);
  if (!plan.unfused) {
    // y = relu(1 * conv(x) + 0 * z + bias), z = y (read, but scaled by 0, as cuDNN asks for it).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    const cudnnStatus_t status = cudnnConvolutionBiasActivationForward(
        stream.cudnn(), &one, d.x.get(), inputs[0]->data(), d.w.get(), inputs[1]->data(),
        d.conv.get(), fwd_algo, workspace, algo.workspace, &zero, d.y.get(), y, d.bias.get(),
        inputs[2]->data(), d.relu.get(), d.y.get(), y);
#pragma GCC diagnostic pop
    if (status == CUDNN_STATUS_SUCCESS) return;
    if (status != CUDNN_STATUS_NOT_SUPPORTED)
      throw_cuda_error("cudnnConvolutionBiasActivationForward", cudnnGetErrorString(status), what);
    plan.unfused = true;
    VLOG(1) << what << ": cuDNN does not support the fused convolution + bias + ReLU with forward "
            << "algorithm " << algo.algo << "; three calls instead";
  }
  PURINE_CUDNN_CALL(
      what, cudnnConvolutionForward(stream.cudnn(), &one, d.x.get(), inputs[0]->data(), d.w.get(),
                                    inputs[1]->data(), d.conv.get(), fwd_algo, workspace,
                                    algo.workspace, &zero, d.y.get(), y));
  PURINE_CUDNN_CALL(what, cudnnAddTensor(stream.cudnn(), &one, d.bias.get(), inputs[2]->data(),
                                         &one, d.y.get(), y));
  PURINE_CUDNN_CALL(what, cudnnActivationForward(stream.cudnn(), d.relu.get(), &one, d.y.get(), y,
                                                 &zero, d.y.get(), y));
}

// Runs `direction` of the op on its stream: the geometry from inputs (x at x_input, w at
// w_input), the descriptors and algorithm from the cache. `bias_relu`: conv_bias_relu's forward,
// its bias input 2.
void convolve(const Operator& op, ConvDirection direction, int x_input, int w_input,
              const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
              OpContext& context, bool bias_relu = false) {
  const std::string type = op.type();
  const char* what = type.c_str();
  const auto& base = static_cast<const ConvOpBase&>(op);
  const ConvGeometry g =
      base.geometry(inputs[x_input]->shape(), x_input, inputs[w_input]->shape(), w_input);
  if (g.n == 0) return;
  CudaStream& stream = stream_of(context);
  Plan& plan = plan_for(g, stream, direction, base.params().deterministic_now(),
                        base.params().gpu_algorithm);
  const Descriptors& d = plan.d;
  const ConvAlgorithm& algo = plan.algo;
  void* workspace = stream.workspace(algo.workspace);
  const float one = 1.0f, zero = 0.0f;
  if (bias_relu) {
    fused_forward(what, stream, plan, workspace, inputs, outputs);
    return;
  }
  switch (direction) {
    case ConvDirection::kForward:
      PURINE_CUDNN_CALL(what, cudnnConvolutionForward(
                                  stream.cudnn(), &one, d.x.get(), inputs[0]->data(), d.w.get(),
                                  inputs[1]->data(), d.conv.get(),
                                  static_cast<cudnnConvolutionFwdAlgo_t>(algo.algo), workspace,
                                  algo.workspace, &zero, d.y.get(), outputs[0]->mutable_data()));
      break;
    case ConvDirection::kBackwardData:  // (dy, w, x) -> dx
      PURINE_CUDNN_CALL(what, cudnnConvolutionBackwardData(
                                  stream.cudnn(), &one, d.w.get(), inputs[1]->data(), d.y.get(),
                                  inputs[0]->data(), d.conv.get(),
                                  static_cast<cudnnConvolutionBwdDataAlgo_t>(algo.algo), workspace,
                                  algo.workspace, &zero, d.x.get(), outputs[0]->mutable_data()));
      break;
    case ConvDirection::kBackwardWeights:  // (dy, x, w) -> dw
      PURINE_CUDNN_CALL(
          what,
          cudnnConvolutionBackwardFilter(
              stream.cudnn(), &one, d.x.get(), inputs[1]->data(), d.y.get(), inputs[0]->data(),
              d.conv.get(), static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo.algo), workspace,
              algo.workspace, &zero, d.w.get(), outputs[0]->mutable_data()));
      break;
  }
}

void forward(const Operator& op, const std::vector<const Tensor*>& inputs,
             const std::vector<Tensor*>& outputs, OpContext& context) {
  convolve(op, ConvDirection::kForward, 0, 1, inputs, outputs, context);
}
void bias_relu_forward(const Operator& op, const std::vector<const Tensor*>& inputs,
                       const std::vector<Tensor*>& outputs, OpContext& context) {
  convolve(op, ConvDirection::kForward, 0, 1, inputs, outputs, context, /*bias_relu=*/true);
}
void grad_data(const Operator& op, const std::vector<const Tensor*>& inputs,
               const std::vector<Tensor*>& outputs, OpContext& context) {
  convolve(op, ConvDirection::kBackwardData, 2, 1, inputs, outputs, context);
}
void grad_weight(const Operator& op, const std::vector<const Tensor*>& inputs,
                 const std::vector<Tensor*>& outputs, OpContext& context) {
  convolve(op, ConvDirection::kBackwardWeights, 1, 2, inputs, outputs, context);
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(ConvOp, forward);
PURINE_REGISTER_GPU_KERNEL(ConvBiasReluOp, bias_relu_forward);
PURINE_REGISTER_GPU_KERNEL(ConvGradDataOp, grad_data);
PURINE_REGISTER_GPU_KERNEL(ConvGradWeightOp, grad_weight);

}  // namespace purine::cuda
