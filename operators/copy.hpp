// copy: y = x, where x and y may live at different locations. It is the only operator whose
// input and output locations differ (validation exempts it): host<->GPU, GPU<->GPU and
// rank<->rank. Between ranks the runtime splits it into a non-blocking send on the input's rank
// (a sink there) and the matching receive on the output's rank (a source there); see
// operators/mpi/transfer.hpp. Inputs: x; outputs: y of x's shape. Not differentiable yet.
#pragma once

#include "operators/operator.hpp"

namespace purine {

class CopyOp : public Operator {
 public:
  explicit CopyOp(Attrs attrs) : Operator(std::move(attrs)) {}
  std::string type() const override { return "copy"; }
  int num_inputs() const override { return 1; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override {
    return {inputs[0]};
  }
  // Copies between two tensors of this process (any locations this build supports).
  static void copy(const Tensor& from, Tensor& to);

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

}  // namespace purine
