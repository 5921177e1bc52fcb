#include "operators/sgd_update.hpp"

#include "base/error.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/registry.hpp"

namespace purine {

namespace {

float checked_nonnegative(const Attrs& attrs, const char* key) {
  const double v = attrs.get_float(key, 0.0);
  require(v >= 0.0, "sgd_update: attribute '", key, "' is ", v, "; expected >= 0");
  return static_cast<float>(v);
}

}  // namespace

SgdUpdateOp::SgdUpdateOp(Attrs attrs)
    : TypedOperator(std::move(attrs)),
      momentum_(checked_nonnegative(attrs_, "momentum")),
      weight_decay_(checked_nonnegative(attrs_, "weight_decay")) {}

std::vector<Shape> SgdUpdateOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 2);
  require(inputs[1] == inputs[0], type(), ": input 1 (grad) has shape ", inputs[1],
          ", expected input 0's (weight) shape ", inputs[0]);
  require(inputs[2] == inputs[0], type(), ": input 2 (history) has shape ", inputs[2],
          ", expected input 0's (weight) shape ", inputs[0]);
  require(inputs[3].ndim() == 0, type(), ": input 3 (lr) has shape ", inputs[3],
          "; expected a scalar {}");
  return {inputs[0], inputs[0]};
}

void SgdUpdateOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                              const std::vector<Tensor*>& outputs, OpContext&) {
  const char* names[] = {"weight", "grad", "history"};
  for (int i = 0; i < 3; ++i) {
    require(inputs[i]->is_contiguous(), type(), ": input ", i, " (", names[i],
            ") is a strided view of shape ", inputs[i]->shape(),
            "; this kernel needs contiguous tensors");
  }
  for (int i = 0; i < 2; ++i) {
    require(outputs[i]->is_contiguous(), type(), ": output ", i, " is a strided view of shape ",
            outputs[i]->shape(), "; this kernel needs contiguous tensors");
  }
  const int64_t n = inputs[0]->count();
  const float* w = inputs[0]->data();
  const float* g = inputs[1]->data();
  const float* h = inputs[2]->data();
  const float lr = *inputs[3]->data();
  float* new_w = outputs[0]->mutable_data();
  float* new_h = outputs[1]->mutable_data();
  const float momentum = momentum_;
  const float decay = weight_decay_;
  // Each element is read before it is written, so in-place updates are safe.
#pragma omp parallel for if (n > kParallelMinArithmetic)
  for (int64_t i = 0; i < n; ++i) {
    const float wi = w[i];
    const float hi = momentum * h[i] + lr * (g[i] + decay * wi);
    new_h[i] = hi;
    new_w[i] = wi - hi;
  }
}

PURINE_REGISTER_OPERATOR(SgdUpdateOp);

}  // namespace purine
