// Top-k classification accuracy (not differentiable).
//   accuracy: (scores [N, C], labels [N]) -> {} the fraction of rows whose label is among the
//     `top_k` highest scores: a row is correct when fewer than top_k of its scores are strictly
//     greater than the label's score (so a tie with the label's score never counts against it).
// Attribute `top_k` (int, default 1, >= 1). Labels are floats holding class indices; one that is
// not an integer in [0, C) throws purine::Error naming the row and the value. Contiguous tensors.
#pragma once

#include <string>
#include <vector>

#include "operators/operator.hpp"

namespace purine {

class AccuracyOp : public TypedOperator<AccuracyOp> {
 public:
  static constexpr char kType[] = "accuracy";
  static constexpr char kSignature[] =
      "(scores [N, C], labels [N]) -> accuracy {}; attrs: top_k (int, 1)";
  explicit AccuracyOp(Attrs attrs);
  int num_inputs() const override { return 2; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  int64_t top_k() const { return top_k_; }

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;

 private:
  const int64_t top_k_;
};

}  // namespace purine
