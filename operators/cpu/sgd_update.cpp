#include "operators/sgd_update.hpp"

#include "base/error.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/cpu/update_loop.hpp"
#include "operators/formulas.hpp"
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
      weight_decay_(checked_nonnegative(attrs_, "weight_decay")),
      count_non_finite_(cpu::counts_non_finite(attrs_, kType)) {}

std::vector<Shape> SgdUpdateOp::output_shapes(const std::vector<Shape>& inputs) const {
  require(inputs.size() >= 4 && inputs.size() % 3 == 1, type(), ": ", inputs.size(),
          " inputs; expected (weight, grad, history) for each weight, then lr");
  std::vector<Shape> outputs;
  for (size_t k = 0; k + 1 < inputs.size(); k += 3) {
    const std::string group = inputs.size() > 4 ? str(" of weight ", k / 3) : "";
    require(inputs[k + 1] == inputs[k], type(), ": input ", k + 1, " (grad", group, ") has shape ",
            inputs[k + 1], ", expected input ", k, "'s (weight) shape ", inputs[k]);
    require(inputs[k + 2] == inputs[k], type(), ": input ", k + 2, " (history", group,
            ") has shape ", inputs[k + 2], ", expected input ", k, "'s (weight) shape ", inputs[k]);
    outputs.insert(outputs.end(), {inputs[k], inputs[k]});
  }
  require(inputs.back().ndim() == 0, type(), ": input ", inputs.size() - 1, " (lr) has shape ",
          inputs.back(), "; expected a scalar {}");
  if (count_non_finite_) outputs.push_back(Shape{});
  return outputs;
}

void SgdUpdateOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                              const std::vector<Tensor*>& outputs, OpContext&) {
  const float lr = *inputs.back()->data();
  const float momentum = momentum_;
  const float decay = weight_decay_;
  int64_t non_finite = 0;
  for (size_t k = 0; k + 1 < inputs.size(); k += 3) {
    const int64_t n = inputs[k]->count();
    const float* w = inputs[k]->data();
    const float* g = inputs[k + 1]->data();
    const float* h = inputs[k + 2]->data();
    float* new_w = outputs[2 * k / 3]->mutable_data();
    float* new_h = outputs[2 * k / 3 + 1]->mutable_data();
    // Each element is read before it is written, so in-place updates are safe.
    const formula::SgdStep step{lr, momentum, decay};
    const auto one = [=](int64_t i) {
      const float wi = w[i];
      const float hi = step.history(wi, g[i], h[i]);
      new_h[i] = hi;
      return new_w[i] = step.weight(wi, hi);
    };
    const __m128 lr4 = _mm_set1_ps(lr), momentum4 = _mm_set1_ps(momentum),
                 decay4 = _mm_set1_ps(decay);
    const auto four = [=](int64_t i, auto store) {  // one's operations, in its order
      const __m128 wi = _mm_loadu_ps(w + i);
      const __m128 step = _mm_mul_ps(lr4, _mm_add_ps(_mm_loadu_ps(g + i), _mm_mul_ps(decay4, wi)));
      const __m128 hi = _mm_add_ps(_mm_mul_ps(momentum4, _mm_loadu_ps(h + i)), step);
      store(new_h + i, hi);
      const __m128 next = _mm_sub_ps(wi, hi);
      store(new_w + i, next);
      return next;
    };
    non_finite += cpu::update_loop(n, {new_w, new_h}, kParallelMinArithmetic, one, four);
  }
  if (count_non_finite_) *outputs.back()->mutable_data() = static_cast<float>(non_finite);
}

PURINE_REGISTER_OPERATOR(SgdUpdateOp);

}  // namespace purine
