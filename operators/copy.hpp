// copy: y = x, where x and y may live at different locations. It is the only operator whose
// input and output locations differ (its traits say it bridges locations): host<->GPU,
// GPU<->GPU and rank<->rank. Between ranks it is asynchronous, in two halves: a non-blocking
// send on the input's rank (a sink there) and the matching receive on the output's rank (a
// source there), chosen by the context's PeerLink (operators/mpi/copy.cpp). Inputs: x;
// outputs: y of x's shape. Gradient: dx is dy (an alias); autodiff puts every input gradient at
// its input's location, so dy is copied back to x's location by another copy
// (purine/autodiff.hpp).
#pragma once

#include "operators/operator.hpp"

namespace purine {

class CopyOp : public TypedOperator<CopyOp, SameShapeOp> {
 public:
  static constexpr char kType[] = "copy";
  static constexpr char kSignature[] = "x -> y (between locations: host, GPU, rank)";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 1; }
  bool differentiable() const override { return true; }
  GradientSpec gradient() const override { return {{}, {{0, 0}}, {}}; }
  // No arithmetic: the bytes moved (what a link carries between locations).
  OpCost cost(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) const override;
  OperatorTraits traits() const override {
    OperatorTraits t;
    t.bridges_locations = t.communicates = true;
    t.strided_on_cpu = true;  // between host locations
    return t;
  }
  // The send or receive half when context.link says this rank runs one; else nullptr.
  std::unique_ptr<AsyncWork> bind_async(const std::vector<const Tensor*>& inputs,
                                        const std::vector<Tensor*>& outputs,
                                        const OpContext& context) const override;
  // Copies between two tensors of this process (any locations this build supports).
  static void copy(const Tensor& from, Tensor& to);

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

}  // namespace purine
