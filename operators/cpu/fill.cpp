#include "operators/fill.hpp"

#include <cmath>

#include "base/error.hpp"
#include "operators/registry.hpp"

namespace purine {

namespace {

// The `shape` attribute of a fill op of type `type`, validated.
Shape checked_shape(const std::string& type, const Attrs& attrs) {
  require(attrs.has("shape"), type, ": missing attribute 'shape' (the output's extents)");
  std::vector<int64_t> dims = attrs.get_ints("shape");
  for (size_t d = 0; d < dims.size(); ++d) {
    require(dims[d] >= 0, type, ": attribute 'shape' has extent ", dims[d], " at position ", d,
            "; expected extents >= 0");
  }
  return Shape(std::move(dims));
}

struct Fans {
  double in, out;
};

Fans fans_of(const Shape& shape) {
  const double count = static_cast<double>(shape.count());
  if (shape.ndim() < 2) return {count, count};
  return {count / static_cast<double>(shape[0]), count / static_cast<double>(shape[1])};
}

}  // namespace

FillOp::FillOp(Attrs attrs, const char* type)
    : Operator(std::move(attrs)), shape_(checked_shape(type, attrs_)) {}

std::vector<Shape> FillOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  return {shape_};
}

FillConstantOp::FillConstantOp(Attrs attrs)
    : TypedOperator(std::move(attrs), kType),
      value_(static_cast<float>(attrs_.get_float("value", 0.0))) {}

void FillConstantOp::compute_cpu(const std::vector<const Tensor*>&,
                                 const std::vector<Tensor*>& outputs, OpContext&) {
  outputs[0]->fill(value_);
}

FillUniformOp::FillUniformOp(Attrs attrs)
    : TypedOperator(std::move(attrs), kType),
      low_(static_cast<float>(attrs_.get_float("low", 0.0))),
      high_(static_cast<float>(attrs_.get_float("high", 1.0))) {
  require(low_ <= high_, type(), ": attributes 'low' = ", low_, " and 'high' = ", high_,
          "; expected low <= high");
}

void FillUniformOp::compute_cpu(const std::vector<const Tensor*>&,
                                const std::vector<Tensor*>& outputs, OpContext& context) {
  float* y = outputs[0]->mutable_data();
  const int64_t n = outputs[0]->count();
  for (int64_t i = 0; i < n; ++i) y[i] = context.rng->uniform(low_, high_);
}

FillGaussianOp::FillGaussianOp(Attrs attrs)
    : TypedOperator(std::move(attrs), kType),
      mean_(static_cast<float>(attrs_.get_float("mean", 0.0))),
      std_(static_cast<float>(attrs_.get_float("std", 1.0))) {
  require(std_ >= 0.0f, type(), ": attribute 'std' is ", std_, "; expected std >= 0");
}

void FillGaussianOp::compute_cpu(const std::vector<const Tensor*>&,
                                 const std::vector<Tensor*>& outputs, OpContext& context) {
  float* y = outputs[0]->mutable_data();
  const int64_t n = outputs[0]->count();
  for (int64_t i = 0; i < n; ++i) y[i] = context.rng->gaussian(mean_, std_);
}

FillXavierOp::FillXavierOp(Attrs attrs) : TypedOperator(std::move(attrs), kType) {}

void FillXavierOp::compute_cpu(const std::vector<const Tensor*>&,
                               const std::vector<Tensor*>& outputs, OpContext& context) {
  const int64_t n = outputs[0]->count();
  if (n == 0) return;
  const Fans fans = fans_of(shape_);
  const float bound = static_cast<float>(std::sqrt(6.0 / (fans.in + fans.out)));
  float* y = outputs[0]->mutable_data();
  for (int64_t i = 0; i < n; ++i) y[i] = context.rng->uniform(-bound, bound);
}

FillKaimingOp::FillKaimingOp(Attrs attrs) : TypedOperator(std::move(attrs), kType) {}

void FillKaimingOp::compute_cpu(const std::vector<const Tensor*>&,
                                const std::vector<Tensor*>& outputs, OpContext& context) {
  const int64_t n = outputs[0]->count();
  if (n == 0) return;
  const float stddev = static_cast<float>(std::sqrt(2.0 / fans_of(shape_).in));
  float* y = outputs[0]->mutable_data();
  for (int64_t i = 0; i < n; ++i) y[i] = context.rng->gaussian(0.0f, stddev);
}

PURINE_REGISTER_OPERATOR(FillConstantOp);
PURINE_REGISTER_OPERATOR(FillUniformOp);
PURINE_REGISTER_OPERATOR(FillGaussianOp);
PURINE_REGISTER_OPERATOR(FillXavierOp);
PURINE_REGISTER_OPERATOR(FillKaimingOp);

}  // namespace purine
