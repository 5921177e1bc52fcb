#include "operators/inner_product.hpp"

#include <algorithm>

#include "base/error.hpp"
#include "operators/cpu/blocked_sgemm.hpp"
#include "operators/cpu/fused_parts.hpp"
#include "operators/cpu/thread_workspace.hpp"
#include "operators/registry.hpp"

namespace purine {

namespace {

// Checks x [N, ...] with rank >= 2 and returns K, the features per sample.
int64_t features(const std::string& type, const Shape& x) {
  require(x.ndim() >= 2, type, ": input x has shape ", x,
          ", expected rank 2 or more ([N, K] or [N, C, H, W])");
  return x.count_from(1);
}

}  // namespace

Shape inner_product_shape(const std::string& type, const Shape& x, const Shape& w) {
  const int64_t k = features(type, x);
  require(w.ndim() == 2, type, ": input 1 (weight) has shape ", w, ", expected [O, ", k, "]");
  require(w[1] == k, type, ": input 1 (weight) has ", w[1], " columns, input 0 has ", k,
          " features per sample (shape ", x, "); expected equal");
  return Shape{x[0], w[0]};
}

std::vector<Shape> InnerProductOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  return {inner_product_shape(type(), inputs[0], inputs[1])};
}

GradientSpec InnerProductOp::gradient() const {
  GradientSpec spec;
  spec.ops.push_back(
      {InnerProductGradDataOp::kType, {}, {output_grad(0), input(1), input(0)}, {input_grad(0)}});
  spec.ops.push_back(
      {InnerProductGradWeightOp::kType, {}, {output_grad(0), input(0)}, {input_grad(1)}});
  return spec;
}

// Weights of at least this many floats are the left operand of the forward product (below).
constexpr int64_t kWeightFirstMinFloats = int64_t{1} << 21;

void inner_product_cpu(const Tensor& x, const Tensor& w, Tensor& y) {
  const int64_t n = x.shape()[0];
  const int64_t k = x.shape().count_from(1);
  const int64_t o = w.shape()[0];
  if (o * k < kWeightFirstMinFloats) {
    // y [N, O] = x [N, K] * w [O, K]^T
    blocked_sgemm('N', 'T', n, o, k, x.data(), k, w.data(), k, y.mutable_data(), o);
    return;
  }
  // y^T [O, N] = w [O, K] * x [N, K]^T, then transposed into y. oneDNN's sgemm reads a large
  // transposed right operand slowly: for convnet's fc1 (N 64, O 1024, K 3136), one thread, x w^T
  // took 3.7 ms and w x^T with the transpose 2.3 (AVX-512; 4.9 and 4.5 capped at AVX2; 2.2 and
  // 0.65 at N 16); for weights of 1 M floats or fewer the two were within 0.83-1.45x either way
  // (GoogLeNet's 1000 x 1024 classifier at N 128: 1.10x, 0.97x capped at AVX2).
  float* transposed = workspace_floats(thread_workspace(sizeof(float) * o * n), 0);
  blocked_sgemm('N', 'T', o, n, k, w.data(), k, x.data(), k, transposed, n);
  float* out = y.mutable_data();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < o; ++j) out[i * o + j] = transposed[j * n + i];
}

void InnerProductOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                 const std::vector<Tensor*>& outputs, OpContext&) {
  inner_product_cpu(*inputs[0], *inputs[1], *outputs[0]);
}

std::vector<Shape> InnerProductGradDataOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  const Shape& dy = inputs[0];
  const Shape& w = inputs[1];
  const Shape& x = inputs[2];
  const int64_t k = features(type(), x);
  require(w.ndim() == 2 && w[1] == k, type(), ": input 1 (weight) has shape ", w, ", expected [O, ",
          k, "] for input 2 (x) of shape ", x);
  require(dy == Shape{x[0], w[0]}, type(), ": input 0 (dy) has shape ", dy, ", expected [", x[0],
          ",", w[0], "]");
  return {x};
}

void InnerProductGradDataOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                         const std::vector<Tensor*>& outputs, OpContext&) {
  const int64_t n = inputs[0]->shape()[0];
  const int64_t o = inputs[0]->shape()[1];
  const int64_t k = inputs[1]->shape()[1];
  // dx [N, K] = dy [N, O] * w [O, K]
  blocked_sgemm('N', 'N', n, k, o, inputs[0]->data(), o, inputs[1]->data(), k,
                outputs[0]->mutable_data(), k);
}

std::vector<Shape> InnerProductGradWeightOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  const Shape& dy = inputs[0];
  const Shape& x = inputs[1];
  const int64_t k = features(type(), x);
  require(dy.ndim() == 2 && dy[0] == x[0], type(), ": input 0 (dy) has shape ", dy, ", expected [",
          x[0], ", O] for input 1 (x) of shape ", x);
  return {Shape{dy[1], k}};
}

void InnerProductGradWeightOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                           const std::vector<Tensor*>& outputs, OpContext&) {
  const int64_t n = inputs[0]->shape()[0];
  const int64_t o = inputs[0]->shape()[1];
  const int64_t k = inputs[1]->shape().count_from(1);
  // dw [O, K] = dy [N, O]^T * x [N, K]
  blocked_sgemm('T', 'N', o, k, n, inputs[0]->data(), o, inputs[1]->data(), k,
                outputs[0]->mutable_data(), k);
}

PURINE_REGISTER_OPERATOR(InnerProductOp);
PURINE_REGISTER_OPERATOR(InnerProductGradDataOp);
PURINE_REGISTER_OPERATOR(InnerProductGradWeightOp);

}  // namespace purine
