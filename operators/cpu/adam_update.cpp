#include "operators/adam_update.hpp"

#include <cmath>

#include "base/error.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/registry.hpp"

namespace purine {

namespace {

AdamUpdateOp::Hyper checked_hyper(const Attrs& attrs) {
  AdamUpdateOp::Hyper h;
  const double beta1 = attrs.get_float("beta1", 0.9), beta2 = attrs.get_float("beta2", 0.999);
  const double eps = attrs.get_float("eps", 1e-8), decay = attrs.get_float("weight_decay", 0.0);
  const int64_t decoupled = attrs.get_int("decoupled", 0);
  require(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1,
          "adam_update: beta1 and beta2 must be in [0, 1), got ", beta1, " and ", beta2);
  require(eps > 0, "adam_update: eps must be positive, got ", eps);
  require(decay >= 0, "adam_update: weight_decay must be non-negative, got ", decay);
  require(decoupled == 0 || decoupled == 1, "adam_update: decoupled must be 0 or 1, got ",
          decoupled);
  h.beta1 = static_cast<float>(beta1);
  h.beta2 = static_cast<float>(beta2);
  h.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  h.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  h.eps = static_cast<float>(eps);
  h.weight_decay = static_cast<float>(decay);
  h.decoupled = decoupled == 1;
  return h;
}

}  // namespace

AdamUpdateOp::AdamUpdateOp(Attrs attrs)
    : TypedOperator(std::move(attrs)), hyper_(checked_hyper(attrs_)) {}

std::vector<Shape> AdamUpdateOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 3);
  const char* names[] = {"weight", "grad", "m", "v"};
  for (int i = 1; i < 4; ++i)
    require(inputs[i] == inputs[0], type(), ": input ", i, " (", names[i], ") has shape ",
            inputs[i], ", expected input 0's (weight) shape ", inputs[0]);
  require(inputs[4].ndim() == 0 && inputs[5].ndim() == 0, type(),
          ": inputs 4 (lr) and 5 (step) must be scalars {}, got ", inputs[4], " and ", inputs[5]);
  return {inputs[0], inputs[0], inputs[0]};
}

void AdamUpdateOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                               const std::vector<Tensor*>& outputs, OpContext&) {
  for (size_t i = 0; i < 4; ++i)
    require(inputs[i]->is_contiguous(), type(), ": input ", i,
            " is a strided view; this kernel needs contiguous tensors");
  for (size_t i = 0; i < 3; ++i)
    require(outputs[i]->is_contiguous(), type(), ": output ", i,
            " is a strided view; this kernel needs contiguous tensors");
  const float lr = *inputs[4]->data();
  const double t = *inputs[5]->data();
  require(t >= 1, type(), ": step must be at least 1 (the first update), got ", t);
  const Hyper h = hyper_;
  const float step_size = static_cast<float>(lr / (1.0 - std::pow(h.beta1, t)));
  const float correction2 = static_cast<float>(std::sqrt(1.0 - std::pow(h.beta2, t)));
  const float shrink = h.decoupled ? 1.0f - lr * h.weight_decay : 1.0f;
  const float l2 = h.decoupled ? 0.0f : h.weight_decay;
  const int64_t n = inputs[0]->count();
  const float *w = inputs[0]->data(), *g = inputs[1]->data();
  const float *m = inputs[2]->data(), *v = inputs[3]->data();
  float *new_w = outputs[0]->mutable_data(), *new_m = outputs[1]->mutable_data();
  float* new_v = outputs[2]->mutable_data();
  // Each element is read before it is written, so in-place updates are safe.
#pragma omp parallel for if (n > kParallelMinArithmetic)
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + l2 * w[i];
    const float mi = h.beta1 * m[i] + h.one_minus_beta1 * gi;
    const float vi = h.beta2 * v[i] + h.one_minus_beta2 * gi * gi;
    new_m[i] = mi;
    new_v[i] = vi;
    new_w[i] = w[i] * shrink - step_size * mi / (std::sqrt(vi) / correction2 + h.eps);
  }
}

PURINE_REGISTER_OPERATOR(AdamUpdateOp);

}  // namespace purine
