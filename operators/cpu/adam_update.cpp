#include "operators/adam_update.hpp"

#include "base/error.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/cpu/update_loop.hpp"
#include "operators/formulas.hpp"
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
  h.count_non_finite = cpu::counts_non_finite(attrs, AdamUpdateOp::kType);
  return h;
}

}  // namespace

AdamUpdateOp::AdamUpdateOp(Attrs attrs)
    : TypedOperator(std::move(attrs)), hyper_(checked_hyper(attrs_)) {}

std::vector<Shape> AdamUpdateOp::output_shapes(const std::vector<Shape>& inputs) const {
  require(inputs.size() >= 6 && inputs.size() % 4 == 2, type(), ": ", inputs.size(),
          " inputs; expected (weight, grad, m, v) for each weight, then lr and step");
  const char* names[] = {"weight", "grad", "m", "v"};
  std::vector<Shape> outputs;
  for (size_t k = 0; k + 2 < inputs.size(); k += 4) {
    const std::string group = inputs.size() > 6 ? str(" of weight ", k / 4) : "";
    for (size_t i = 1; i < 4; ++i)
      require(inputs[k + i] == inputs[k], type(), ": input ", k + i, " (", names[i], group,
              ") has shape ", inputs[k + i], ", expected input ", k, "'s (weight) shape ",
              inputs[k]);
    outputs.insert(outputs.end(), {inputs[k], inputs[k], inputs[k]});
  }
  const size_t lr = inputs.size() - 2;
  require(inputs[lr].ndim() == 0 && inputs[lr + 1].ndim() == 0, type(), ": inputs ", lr,
          " (lr) and ", lr + 1, " (step) must be scalars {}, got ", inputs[lr], " and ",
          inputs[lr + 1]);
  if (hyper_.count_non_finite) outputs.push_back(Shape{});
  return outputs;
}

void AdamUpdateOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                               const std::vector<Tensor*>& outputs, OpContext&) {
  const float lr = *inputs[inputs.size() - 2]->data();
  const double t = *inputs.back()->data();
  require(t >= 1, type(), ": step must be at least 1 (the first update), got ", t);
  const Hyper h = hyper_;
  const formula::AdamStep step(h.beta1, h.beta2, h.one_minus_beta1, h.one_minus_beta2, h.eps,
                               h.weight_decay, h.decoupled, lr, t);
  int64_t non_finite = 0;
  for (size_t k = 0; k + 2 < inputs.size(); k += 4) {
    const int64_t n = inputs[k]->count();
    const float *w = inputs[k]->data(), *g = inputs[k + 1]->data();
    const float *m = inputs[k + 2]->data(), *v = inputs[k + 3]->data();
    const size_t o = 3 * k / 4;
    float *new_w = outputs[o]->mutable_data(), *new_m = outputs[o + 1]->mutable_data();
    float* new_v = outputs[o + 2]->mutable_data();
    // Each element is read before it is written, so in-place updates are safe.
    const auto one = [=](int64_t i) {
      const float wi = w[i];
      const float gi = step.gradient(wi, g[i]);
      const float mi = step.first_moment(m[i], gi);
      const float vi = step.second_moment(v[i], gi);
      new_m[i] = mi;
      new_v[i] = vi;
      return new_w[i] = step.weight(wi, mi, vi);
    };
    const __m128 l2_4 = _mm_set1_ps(step.l2), beta1 = _mm_set1_ps(step.beta1),
                 beta2 = _mm_set1_ps(step.beta2),
                 one_minus_beta1 = _mm_set1_ps(step.one_minus_beta1),
                 one_minus_beta2 = _mm_set1_ps(step.one_minus_beta2), eps = _mm_set1_ps(step.eps),
                 shrink4 = _mm_set1_ps(step.shrink), step_size4 = _mm_set1_ps(step.step_size),
                 correction2_4 = _mm_set1_ps(step.correction2);
    const auto four = [=](int64_t i, auto store) {  // one's operations, in its order
      const __m128 wi = _mm_loadu_ps(w + i);
      const __m128 gi = _mm_add_ps(_mm_loadu_ps(g + i), _mm_mul_ps(l2_4, wi));
      const __m128 mi =
          _mm_add_ps(_mm_mul_ps(beta1, _mm_loadu_ps(m + i)), _mm_mul_ps(one_minus_beta1, gi));
      const __m128 vi = _mm_add_ps(_mm_mul_ps(beta2, _mm_loadu_ps(v + i)),
                                   _mm_mul_ps(_mm_mul_ps(one_minus_beta2, gi), gi));
      const __m128 denominator = _mm_add_ps(_mm_div_ps(_mm_sqrt_ps(vi), correction2_4), eps);
      store(new_m + i, mi);
      store(new_v + i, vi);
      const __m128 next =
          _mm_sub_ps(_mm_mul_ps(wi, shrink4), _mm_div_ps(_mm_mul_ps(step_size4, mi), denominator));
      store(new_w + i, next);
      return next;
    };
    non_finite += cpu::update_loop(n, {new_w, new_m, new_v}, kParallelMinArithmetic, one, four);
  }
  if (h.count_non_finite) *outputs.back()->mutable_data() = static_cast<float>(non_finite);
}

PURINE_REGISTER_OPERATOR(AdamUpdateOp);

}  // namespace purine
