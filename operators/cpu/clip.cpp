#include "operators/clip.hpp"

#include "base/error.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/formulas.hpp"
#include "operators/registry.hpp"

namespace purine {

std::vector<Shape> SumSquaresOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  return {Shape{}};
}

void SumSquaresOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                               const std::vector<Tensor*>& outputs, OpContext&) {
  const float* x = inputs[0]->data();
  double sum = 0;  // one order for any thread count
  for (int64_t i = 0; i < inputs[0]->count(); ++i) sum += double(x[i]) * x[i];
  *outputs[0]->mutable_data() = static_cast<float>(sum);
}

ClipScaleOp::ClipScaleOp(Attrs attrs)
    : TypedOperator(std::move(attrs)), max_norm_(attrs_.get_float("max_norm")) {
  require(max_norm_ > 0, "clip_scale: max_norm must be positive, got ", max_norm_);
}

std::vector<Shape> ClipScaleOp::output_shapes(const std::vector<Shape>& inputs) const {
  require(!inputs.empty(), "clip_scale: needs at least one sum of squares");
  for (size_t i = 0; i < inputs.size(); ++i)
    require(inputs[i].ndim() == 0, "clip_scale: input ", i, " has shape ", inputs[i],
            "; expected a scalar {}");
  return {Shape{}};
}

void ClipScaleOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                              const std::vector<Tensor*>& outputs, OpContext&) {
  double sum = 0;
  for (const Tensor* s : inputs) sum += *s->data();
  *outputs[0]->mutable_data() = formula::ClipFactor{max_norm_}(sum);
}

std::vector<Shape> ScaleByOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  require(inputs[1].ndim() == 0, "scale_by: input 1 (c) has shape ", inputs[1],
          "; expected a scalar {}");
  return {inputs[0]};
}

void ScaleByOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                            const std::vector<Tensor*>& outputs, OpContext&) {
  const int64_t n = inputs[0]->count();
  const float c = *inputs[1]->data();
  const float* x = inputs[0]->data();
  float* y = outputs[0]->mutable_data();
  parallel_for(n, n > kParallelMinArithmetic, [&](int64_t i) { y[i] = c * x[i]; });
}

PURINE_REGISTER_OPERATOR(SumSquaresOp);
PURINE_REGISTER_OPERATOR(ClipScaleOp);
PURINE_REGISTER_OPERATOR(ScaleByOp);

}  // namespace purine
