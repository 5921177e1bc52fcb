#include "operators/activation.hpp"

#include <cstdint>
#include <cstring>

#include "base/error.hpp"
#include "operators/cpu/sum_terms.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/formulas.hpp"
#include "operators/registry.hpp"

namespace purine {

namespace {

// y[i] = f(x[i]) over input 0; `parallel_min` elements or more are split over the OpenMP team.
template <typename F>
void map_forward(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                 int64_t parallel_min, F f) {
  const int64_t n = inputs[0]->count();
  const float* x = inputs[0]->data();
  float* y = outputs[0]->mutable_data();
  parallel_for(n, n > parallel_min, [&](int64_t i) { y[i] = f(x[i]); });
}

// dx[i] = f(y[i], dy[i]) over inputs y (the forward output) and dy. Both values are loaded
// before f chooses between them, so a select like ReLU's stays a vectorized blend rather than
// a branch on the sign of y (a coin flip to the branch predictor).
template <typename F>
void map_grad(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs, F f) {
  const int64_t n = inputs[0]->count();
  const float* y = inputs[0]->data();
  const float* dy = inputs[1]->data();
  float* dx = outputs[0]->mutable_data();
  parallel_for(n, n > kParallelMinArithmetic, [&](int64_t i) { dx[i] = f(y[i], dy[i]); });
}

// formula::ReluGrad, y > 0 ? dy : 0, on dy's bits: the same floats. Written as the select after
// a sum of dy's parts, GCC moves the sum into the branch and, since an addition may trap, keeps
// the loop scalar and branching: 3x slower than the sum and relu_grad as two ops.
inline float relu_grad_of_bits(float y, float dy) {
  uint32_t bits;
  std::memcpy(&bits, &dy, sizeof bits);
  bits &= y > 0.0f ? ~0u : 0u;
  float dx;
  std::memcpy(&dx, &bits, sizeof dx);
  return dx;
}

}  // namespace

GradientSpec ActivationOp::gradient() const {
  GradientSpec spec;
  spec.ops.push_back({grad_type(), {}, {output(0), output_grad(0)}, {input_grad(0)}});
  return spec;
}

std::string ReluOp::grad_type() const { return ReluGradOp::kType; }
std::string SigmoidOp::grad_type() const { return SigmoidGradOp::kType; }
std::string TanhOp::grad_type() const { return TanhGradOp::kType; }

void ReluOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                         const std::vector<Tensor*>& outputs, OpContext&) {
  map_forward(inputs, outputs, kParallelMinArithmetic, formula::Relu());
}

void SigmoidOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                            const std::vector<Tensor*>& outputs, OpContext&) {
  map_forward(inputs, outputs, kParallelMinTranscendental, formula::Sigmoid());
}

void TanhOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                         const std::vector<Tensor*>& outputs, OpContext&) {
  map_forward(inputs, outputs, kParallelMinTranscendental, formula::Tanh());
}

std::vector<Shape> ReluGradOp::output_shapes(const std::vector<Shape>& inputs) const {
  require(inputs.size() >= 2, type(), ": expected y and at least one dy, got ", inputs.size(),
          " input", inputs.size() == 1 ? "" : "s");
  for (size_t i = 1; i < inputs.size(); ++i)
    require(inputs[i] == inputs[0], type(), ": input ", i, " (dy",
            inputs.size() > 2 ? str("_", i - 1) : "", ") has shape ", inputs[i],
            ", expected input 0's (y) shape ", inputs[0]);
  return {inputs[0]};
}

void ReluGradOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                             const std::vector<Tensor*>& outputs, OpContext&) {
  if (inputs.size() == 2) return map_grad(inputs, outputs, formula::ReluGrad());
  const float* y = inputs[0]->data();  // the terms: dy's parts, inputs 1, 2, ...
  cpu::sum_terms(inputs, 1, *outputs[0],
                 [y](int64_t j, float sum) { return relu_grad_of_bits(y[j], sum); });
}

void SigmoidGradOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                const std::vector<Tensor*>& outputs, OpContext&) {
  map_grad(inputs, outputs, formula::SigmoidGrad());
}

void TanhGradOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                             const std::vector<Tensor*>& outputs, OpContext&) {
  map_grad(inputs, outputs, formula::TanhGrad());
}

PURINE_REGISTER_OPERATOR(ReluOp);
PURINE_REGISTER_OPERATOR(SigmoidOp);
PURINE_REGISTER_OPERATOR(TanhOp);
PURINE_REGISTER_OPERATOR(ReluGradOp);
PURINE_REGISTER_OPERATOR(SigmoidGradOp);
PURINE_REGISTER_OPERATOR(TanhGradOp);

}  // namespace purine
