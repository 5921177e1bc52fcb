#include "operators/bias.hpp"

#include "base/error.hpp"
#include "operators/cpu/contiguity.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/registry.hpp"

namespace purine {

namespace {

// Sum of n floats in a fixed order: eight interleaved partial sums (which the compiler keeps in
// one vector register), then those eight in order.
float sum_floats(const float* p, int64_t n) {
  float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] += p[i + l];
  }
  for (int l = 0; i < n; ++i, ++l) lanes[l] += p[i];
  float total = 0;
  for (int l = 0; l < 8; ++l) total += lanes[l];
  return total;
}

}  // namespace

std::vector<Shape> BiasOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  const Shape& x = inputs[0];
  const Shape& b = inputs[1];
  require(x.ndim() >= 2, type(), ": input 0 (x) has shape ", x,
          ", expected rank 2 or more ([N, C, ...])");
  require(b == Shape{x[1]}, type(), ": input 1 (bias) has shape ", b, ", expected [", x[1],
          "] (the channels of input 0, shape ", x, ")");
  return {x};
}

GradientSpec BiasOp::gradient() const {
  GradientSpec spec;
  spec.aliases.push_back({0, 0});
  spec.ops.push_back({BiasGradOp::kType, {}, {output_grad(0)}, {input_grad(1)}});
  return spec;
}

void BiasOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                         const std::vector<Tensor*>& outputs, OpContext&) {
  require_contiguous(type(), inputs, outputs);
  const Shape& shape = inputs[0]->shape();
  const int64_t n = shape[0];
  const int64_t c = shape[1];
  const int64_t inner = shape.count_from(2);
  const float* x = inputs[0]->data();
  const float* b = inputs[1]->data();
  float* y = outputs[0]->mutable_data();
  if (inner == 1) {  // [N, C]: add the bias row to every sample
#pragma omp parallel for if (n * c > kParallelMinArithmetic)
    for (int64_t i = 0; i < n; ++i) {
      const float* xr = x + i * c;
      float* yr = y + i * c;
      for (int64_t j = 0; j < c; ++j) yr[j] = xr[j] + b[j];
    }
    return;
  }
  const int64_t planes = n * c;
#pragma omp parallel for if (planes * inner > kParallelMinArithmetic)
  for (int64_t p = 0; p < planes; ++p) {
    const float v = b[p % c];
    const float* xp = x + p * inner;
    float* yp = y + p * inner;
    for (int64_t j = 0; j < inner; ++j) yp[j] = xp[j] + v;
  }
}

std::vector<Shape> BiasGradOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  require(inputs[0].ndim() >= 2, type(), ": input 0 (dy) has shape ", inputs[0],
          ", expected rank 2 or more ([N, C, ...])");
  return {Shape{inputs[0][1]}};
}

void BiasGradOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                             const std::vector<Tensor*>& outputs, OpContext&) {
  require_contiguous(type(), inputs, outputs);
  const Shape& shape = inputs[0]->shape();
  const int64_t n = shape[0];
  const int64_t c = shape[1];
  const int64_t inner = shape.count_from(2);
  const float* dy = inputs[0]->data();
  float* db = outputs[0]->mutable_data();
  if (inner == 1) {  // [N, C]: accumulate rows in order; vectorized across channels
    for (int64_t j = 0; j < c; ++j) db[j] = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* row = dy + i * c;
      for (int64_t j = 0; j < c; ++j) db[j] += row[j];
    }
    return;
  }
  // One channel per iteration; samples summed in order, so any thread count gives equal bits.
#pragma omp parallel for if (n * c * inner > kParallelMinArithmetic)
  for (int64_t j = 0; j < c; ++j) {
    float total = 0;
    for (int64_t i = 0; i < n; ++i) total += sum_floats(dy + (i * c + j) * inner, inner);
    db[j] = total;
  }
}

PURINE_REGISTER_OPERATOR(BiasOp);
PURINE_REGISTER_OPERATOR(BiasGradOp);

}  // namespace purine
