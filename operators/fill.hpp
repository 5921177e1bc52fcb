// Fillers: source operators (no inputs) that write one tensor of the shape given by attribute
// `shape` (int list, required, every extent >= 0). The random ones draw from the context's Rng
// one value per element in element order, so a seed gives bit-identical tensors.
//   fill_constant: every element = `value` (float, default 0).
//   fill_uniform:  uniform in [`low`, `high`) (floats, defaults 0 and 1; low <= high).
//   fill_gaussian: normal with `mean` and `std` (floats, defaults 0 and 1; std >= 0).
//   fill_xavier:   Glorot uniform in [-b, b), b = sqrt(6 / (fan_in + fan_out)).
//   fill_kaiming:  He normal, mean 0 and std sqrt(2 / fan_in).
// Fans: for rank >= 2, fan_in = count / shape[0] and fan_out = count / shape[1] (an inner
// product weight [out, in] gives fan_in = in, fan_out = out; a convolution weight
// [out, in, kh, kw] gives in*kh*kw and out*kh*kw). For rank 0 and 1 both fans are the count.
// Invalid attributes throw purine::Error at construction. None is differentiable.
#pragma once

#include <string>
#include <vector>

#include "operators/operator.hpp"

namespace purine {

// The shared part: no inputs, one output of shape `shape`.
class FillOp : public Operator {
 public:
  // `type` names the concrete operator in attribute errors.
  FillOp(Attrs attrs, const char* type);
  int num_inputs() const override { return 0; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;

 protected:
  const Shape shape_;
};

class FillConstantOp : public TypedOperator<FillConstantOp, FillOp> {
 public:
  static constexpr char kType[] = "fill_constant";
  static constexpr char kSignature[] = "() -> y; attrs: shape (ints, required), value (float, 0)";
  explicit FillConstantOp(Attrs attrs);
  float value() const { return value_; }  // the attribute rounded to float

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;

 private:
  const float value_;
};

class FillUniformOp : public TypedOperator<FillUniformOp, FillOp> {
 public:
  static constexpr char kType[] = "fill_uniform";
  static constexpr char kSignature[] =
      "() -> y; attrs: shape (ints, required), low (float, 0), high (float, 1)";
  explicit FillUniformOp(Attrs attrs);
  bool uses_rng() const override { return true; }

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;

 private:
  const float low_, high_;
};

class FillGaussianOp : public TypedOperator<FillGaussianOp, FillOp> {
 public:
  static constexpr char kType[] = "fill_gaussian";
  static constexpr char kSignature[] =
      "() -> y; attrs: shape (ints, required), mean (float, 0), std (float, 1)";
  explicit FillGaussianOp(Attrs attrs);
  bool uses_rng() const override { return true; }

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;

 private:
  const float mean_, std_;
};

class FillXavierOp : public TypedOperator<FillXavierOp, FillOp> {
 public:
  static constexpr char kType[] = "fill_xavier";
  static constexpr char kSignature[] = "() -> y; attrs: shape (ints, required)";
  explicit FillXavierOp(Attrs attrs);
  bool uses_rng() const override { return true; }

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class FillKaimingOp : public TypedOperator<FillKaimingOp, FillOp> {
 public:
  static constexpr char kType[] = "fill_kaiming";
  static constexpr char kSignature[] = "() -> y; attrs: shape (ints, required)";
  explicit FillKaimingOp(Attrs attrs);
  bool uses_rng() const override { return true; }

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

}  // namespace purine
