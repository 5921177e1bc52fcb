#include "operators/elementwise.hpp"

#include "base/error.hpp"
#include "operators/activation.hpp"
#include "operators/cpu/sum_terms.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/formulas.hpp"
#include "operators/registry.hpp"

namespace purine {

GradientSpec VariadicSumOp::gradient() const {
  throw Error(str(type(), ": the gradient depends on the number of inputs; call gradient_for()"));
}

GradientSpec SumOp::gradient_for(const std::vector<Shape>& input_shapes) const {
  GradientSpec spec;
  for (size_t i = 0; i < input_shapes.size(); ++i)
    spec.aliases.emplace_back(static_cast<int>(i), 0);
  return spec;
}

void SumOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                        const std::vector<Tensor*>& outputs, OpContext&) {
  cpu::sum_terms(inputs, 0, *outputs[0], [](int64_t, float sum) { return sum; });
}

GradientSpec SumReluOp::gradient_for(const std::vector<Shape>& input_shapes) const {
  GradientSpec spec;
  spec.ops.push_back({ReluGradOp::kType, {}, {output(0), output_grad(0)}, {temp(0)}});
  for (size_t i = 0; i < input_shapes.size(); ++i)
    spec.temp_aliases.emplace_back(static_cast<int>(i), 0);
  return spec;
}

void SumReluOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                            const std::vector<Tensor*>& outputs, OpContext&) {
  cpu::sum_terms(inputs, 0, *outputs[0], [](int64_t, float sum) { return formula::Relu()(sum); });
}

GradientSpec MulOp::gradient() const {
  GradientSpec spec;
  spec.ops.push_back({MulOp::kType, {}, {output_grad(0), input(1)}, {input_grad(0)}});
  spec.ops.push_back({MulOp::kType, {}, {output_grad(0), input(0)}, {input_grad(1)}});
  return spec;
}

void MulOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                        const std::vector<Tensor*>& outputs, OpContext&) {
  const int64_t n = outputs[0]->count();
  const float* a = inputs[0]->data();
  const float* b = inputs[1]->data();
  float* y = outputs[0]->mutable_data();
  parallel_for(n, n > kParallelMinArithmetic, [&](int64_t i) { y[i] = a[i] * b[i]; });
}

ScaleOp::ScaleOp(Attrs attrs)
    : TypedOperator(std::move(attrs)), alpha_(attrs_.get_float("alpha", 1.0)) {}

GradientSpec ScaleOp::gradient() const {
  GradientSpec spec;
  spec.ops.push_back(
      {ScaleOp::kType, Attrs().set("alpha", alpha_), {output_grad(0)}, {input_grad(0)}});
  return spec;
}

void ScaleOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                          const std::vector<Tensor*>& outputs, OpContext&) {
  const int64_t n = outputs[0]->count();
  const float alpha = this->alpha();
  const float* x = inputs[0]->data();
  float* y = outputs[0]->mutable_data();
  parallel_for(n, n > kParallelMinArithmetic, [&](int64_t i) { y[i] = alpha * x[i]; });
}

PURINE_REGISTER_OPERATOR(SumOp);
PURINE_REGISTER_OPERATOR(SumReluOp);
PURINE_REGISTER_OPERATOR(MulOp);
PURINE_REGISTER_OPERATOR(ScaleOp);

}  // namespace purine
