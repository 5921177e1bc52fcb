#include "operators/elementwise.hpp"

#include <algorithm>

#include "base/error.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/registry.hpp"

namespace purine {

namespace {

// sum works through blocks of this many elements, accumulating in a local buffer so that the
// output may share memory with any input.
constexpr int64_t kSumBlock = 1024;

}  // namespace

GradientSpec SumOp::gradient() const {
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
  const int64_t n = outputs[0]->count();
  const int64_t terms = static_cast<int64_t>(inputs.size());
  std::vector<const float*> x;
  for (const Tensor* t : inputs) x.push_back(t->data());
  float* y = outputs[0]->mutable_data();
  if (terms == 2) {
    // The common case (gradient fan-in, ring reductions) in one pass: each y[j] is written after
    // both x[.][j] are read, so y may still be either input; parallel_for_simd vectorizes it
    // even then.
    const float* x0 = x[0];
    const float* x1 = x[1];
    parallel_for_simd(n, n * terms > kParallelMinArithmetic,
                      [&](int64_t j) { y[j] = x0[j] + x1[j]; });
    return;
  }
  const int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
  parallel_for(blocks, n * terms > kParallelMinArithmetic, [&](int64_t b) {
    const int64_t begin = b * kSumBlock;
    const int64_t len = std::min(kSumBlock, n - begin);
    float acc[kSumBlock];
    const float* x0 = x[0] + begin;
    for (int64_t j = 0; j < len; ++j) acc[j] = x0[j];
    for (int64_t k = 1; k < terms; ++k) {
      const float* xk = x[k] + begin;
      for (int64_t j = 0; j < len; ++j) acc[j] += xk[j];
    }
    std::copy(acc, acc + len, y + begin);
  });
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
PURINE_REGISTER_OPERATOR(MulOp);
PURINE_REGISTER_OPERATOR(ScaleOp);

}  // namespace purine
