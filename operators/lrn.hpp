// Local response normalization across channels (caffe's LRN, AlexNet), and its gradient kernel.
//   lrn:      (x [N, C, ...]) -> y (x's shape),
//             y[n,c,s] = x[n,c,s] / scale[n,c,s]^beta,
//             scale[n,c,s] = k + alpha / size * sum of x[n,c',s]^2 over the channels c' in
//             [c - (size - 1) / 2, c + (size - 1) / 2] that exist (zero padding).
//   lrn_grad: (x, y, dy) -> dx (x's shape),
//             dx = dy scale^-beta - (2 alpha beta / size) x sum_c' dy[c'] y[c'] / scale[c']
//             over the same window of channels around c.
// Attributes (the same on both): `size` (odd, default 5), `alpha` (1e-4), `beta` (0.75),
// `k` (1.0). lrn is differentiable; lrn_grad is not. All tensors must be contiguous.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "operators/operator.hpp"

namespace purine {

// The attributes of lrn and lrn_grad, read and checked once when an op is made.
struct LrnParams {
  // Throws purine::Error naming `type` on an even size, k <= 0 or alpha < 0.
  LrnParams(const Attrs& attrs, const char* type);
  int64_t size;
  float alpha, beta, k;
};

// What lrn and lrn_grad share: the attributes, and one output of input 0's shape (every input
// has it).
class LrnOpBase : public SameShapeOp {
 public:
  LrnOpBase(Attrs attrs, const char* type) : SameShapeOp(std::move(attrs)), params_(attrs_, type) {}
  const LrnParams& params() const { return params_; }

 protected:
  // Checks that x has rank 2 or more; throws purine::Error.
  void check_input(const Shape& x) const;

 private:
  const LrnParams params_;
};

class LrnOp : public TypedOperator<LrnOp, LrnOpBase> {
 public:
  static constexpr char kType[] = "lrn";
  static constexpr char kSignature[] =
      "x [N, C, ...] -> y; attrs: size (int, 5), alpha (float, 1e-4), beta (float, 0.75), k "
      "(float, 1)";
  explicit LrnOp(Attrs attrs) : TypedOperator(std::move(attrs), kType) {}
  int num_inputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  bool differentiable() const override { return true; }
  GradientSpec gradient() const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class LrnGradOp : public TypedOperator<LrnGradOp, LrnOpBase> {
 public:
  static constexpr char kType[] = "lrn_grad";
  static constexpr char kSignature[] = "(x, y, dy) -> dx; attrs: as lrn";
  explicit LrnGradOp(Attrs attrs) : TypedOperator(std::move(attrs), kType) {}
  int num_inputs() const override { return 3; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;

 protected:
  std::vector<std::string> input_names() const override { return {"x", "y", "dy"}; }
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

}  // namespace purine
