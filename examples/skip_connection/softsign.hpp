// softsign: an operator defined outside the purine library. Like the library's own, each class
// names its type once (kType, which TypedOperator returns from type()) and softsign.cpp
// registers it with PURINE_REGISTER_OPERATOR(SoftsignOp), so graphs, autodiff and the
// dispatcher use it by that name. SameShapeOp, the library's base for element-wise operators,
// supplies their shape logic (one output of input 0's shape; softsign_grad's dy must match y).
//   softsign:      x -> y = x / (1 + |x|)        gradient: softsign_grad(y, dy) -> dx
//   softsign_grad: (y, dy) -> dx = dy * (1 - |y|)^2, which is dy / (1 + |x|)^2 written with the
//                  forward output, so the forward op's input need not be kept.
// Any shape; outputs have the input's shape. No attributes. CPU only; contiguous tensors (the base
// class refuses a strided view with a purine::Error before the kernel runs). Immutable after
// construction: the dispatcher never calls compute() on one instance from two threads at once.
#pragma once

#include <string>
#include <vector>

#include "operators/operator.hpp"

namespace skip_connection {

class SoftsignOp : public purine::TypedOperator<SoftsignOp, purine::SameShapeOp> {
 public:
  static constexpr char kType[] = "softsign";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 1; }
  bool differentiable() const override { return true; }
  // One op: softsign_grad(output(0), output_grad(0)) -> input_grad(0).
  purine::GradientSpec gradient() const override;

 protected:
  void compute_cpu(const std::vector<const purine::Tensor*>& inputs,
                   const std::vector<purine::Tensor*>& outputs,
                   purine::OpContext& context) override;
};

// The gradient kernel: not differentiable itself.
class SoftsignGradOp : public purine::TypedOperator<SoftsignGradOp, purine::SameShapeOp> {
 public:
  static constexpr char kType[] = "softsign_grad";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 2; }

 protected:
  // Names the inputs in shape errors: "input 1 (dy) has shape ..., expected input 0's (y) ...".
  std::vector<std::string> input_names() const override { return {"y", "dy"}; }
  void compute_cpu(const std::vector<const purine::Tensor*>& inputs,
                   const std::vector<purine::Tensor*>& outputs,
                   purine::OpContext& context) override;
};

}  // namespace skip_connection
