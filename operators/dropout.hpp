// Inverted dropout.
//   dropout: x -> (y, mask), both of x's shape. In "train" mode every element is kept with
//     probability 1 - ratio: mask = keep / (1 - ratio) and y = x * mask, so y's expectation is x.
//     Element i is kept when the i-th uniform of a counter-based stream keyed by two draws of the
//     context's Rng is at least ratio (operators/counter_rng.hpp): bit-identical for a seed, for
//     any thread count, and the same masks on the CPU and on a GPU. In "test" mode y = x and
//     mask = 1, and no random numbers are used.
//   dropout_grad: (mask, dy) -> dx = mask * dy.
// Attributes: `ratio` (float, drop probability, default 0.5, 0 <= ratio < 1) and `mode`
// ("train" or "test", default "train"); invalid values throw purine::Error at construction.
// Only y (output 0) is differentiated: one dropout_grad op reading the forward mask.
// All tensors must be contiguous.
#pragma once

#include <string>
#include <vector>

#include "operators/operator.hpp"

namespace purine {

class DropoutOp : public TypedOperator<DropoutOp, SameShapeOp> {
 public:
  static constexpr char kType[] = "dropout";
  static constexpr char kSignature[] =
      "x -> (y, mask); attrs: ratio (float, 0.5), mode (string, train|test)";
  explicit DropoutOp(Attrs attrs);
  int num_inputs() const override { return 1; }
  int num_outputs() const override { return 2; }
  bool uses_rng() const override { return train_; }
  double ratio() const { return ratio_; }
  bool training() const { return train_; }
  OperatorTraits traits() const override {
    OperatorTraits traits;
    traits.replays_random_draws = true;
    return traits;
  }
  bool differentiable() const override { return true; }
  GradientSpec gradient() const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;

 private:
  const double ratio_;
  const bool train_;
};

class DropoutGradOp : public TypedOperator<DropoutGradOp, SameShapeOp> {
 public:
  static constexpr char kType[] = "dropout_grad";
  static constexpr char kSignature[] = "(mask, dy) -> dx";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 2; }

 protected:
  std::vector<std::string> input_names() const override { return {"mask", "dy"}; }
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

}  // namespace purine
