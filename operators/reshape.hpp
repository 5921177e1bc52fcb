// reshape: y = x under another shape of the same element count (attr `shape`, int list; one
// entry may be -1, inferred). Inputs: x; outputs: y. Gradient: reshape of dy back to x's shape.
#pragma once

#include "operators/operator.hpp"

namespace purine {

class ReshapeOp : public TypedOperator<ReshapeOp> {
 public:
  static constexpr char kType[] = "reshape";
  static constexpr char kSignature[] = "x -> y; attrs: shape (ints, required; one entry may be -1)";
  explicit ReshapeOp(Attrs attrs);
  int num_inputs() const override { return 1; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  bool differentiable() const override { return true; }
  OperatorTraits traits() const override { return {{Aliasing::kReshape}}; }
  GradientSpec gradient_for(const std::vector<Shape>& input_shapes) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;

 private:
  std::vector<int64_t> shape_;
};

}  // namespace purine
