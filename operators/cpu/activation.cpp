#include "operators/activation.hpp"

#include <cmath>

#include "operators/cpu/contiguity.hpp"
#include "operators/registry.hpp"
#include "purine/base/error.hpp"

namespace purine {

namespace {

// Element counts below this stay on the calling thread: forking costs more than it saves.
constexpr int64_t kParallelMin = 1 << 15;


}  // namespace

std::vector<Shape> ActivationOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  return {inputs[0]};
}

GradientSpec ActivationOp::gradient() const {
  GradientSpec spec;
  spec.ops.push_back({grad_type(), {}, {output(0), output_grad(0)}, {input_grad(0)}});
  return spec;
}

std::vector<Shape> ActivationGradOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  require(inputs[0] == inputs[1], type(), ": input 1 (dy) has shape ", inputs[1],
          ", expected input 0's (y) shape ", inputs[0]);
  return {inputs[0]};
}

void ReluOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                         const std::vector<Tensor*>& outputs, OpContext&) {
  require_contiguous(type(), inputs, outputs);
  const int64_t n = inputs[0]->count();
  const float* x = inputs[0]->data();
  float* y = outputs[0]->mutable_data();
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void SigmoidOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                            const std::vector<Tensor*>& outputs, OpContext&) {
  require_contiguous(type(), inputs, outputs);
  const int64_t n = inputs[0]->count();
  const float* x = inputs[0]->data();
  float* y = outputs[0]->mutable_data();
#pragma omp parallel for if (n > kParallelMin / 8)
  for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
}

void TanhOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                         const std::vector<Tensor*>& outputs, OpContext&) {
  require_contiguous(type(), inputs, outputs);
  const int64_t n = inputs[0]->count();
  const float* x = inputs[0]->data();
  float* y = outputs[0]->mutable_data();
#pragma omp parallel for if (n > kParallelMin / 8)
  for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
}

void ReluGradOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                             const std::vector<Tensor*>& outputs, OpContext&) {
  require_contiguous(type(), inputs, outputs);
  const int64_t n = inputs[0]->count();
  const float* y = inputs[0]->data();
  const float* dy = inputs[1]->data();
  float* dx = outputs[0]->mutable_data();
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    // Load dy[i] unconditionally: a load under the condition keeps the loop scalar and
    // branchy, and the sign of y is a coin flip to the branch predictor.
    const float g = dy[i];
    dx[i] = y[i] > 0.0f ? g : 0.0f;
  }
}

void SigmoidGradOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                const std::vector<Tensor*>& outputs, OpContext&) {
  require_contiguous(type(), inputs, outputs);
  const int64_t n = inputs[0]->count();
  const float* y = inputs[0]->data();
  const float* dy = inputs[1]->data();
  float* dx = outputs[0]->mutable_data();
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * y[i] * (1.0f - y[i]);
}

void TanhGradOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                             const std::vector<Tensor*>& outputs, OpContext&) {
  require_contiguous(type(), inputs, outputs);
  const int64_t n = inputs[0]->count();
  const float* y = inputs[0]->data();
  const float* dy = inputs[1]->data();
  float* dx = outputs[0]->mutable_data();
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

PURINE_REGISTER_OPERATOR("relu", ReluOp);
PURINE_REGISTER_OPERATOR("sigmoid", SigmoidOp);
PURINE_REGISTER_OPERATOR("tanh", TanhOp);
PURINE_REGISTER_OPERATOR("relu_grad", ReluGradOp);
PURINE_REGISTER_OPERATOR("sigmoid_grad", SigmoidGradOp);
PURINE_REGISTER_OPERATOR("tanh_grad", TanhGradOp);

}  // namespace purine
