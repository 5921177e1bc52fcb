// mpi_allreduce: y = the sum of x over every MPI rank (native MPI_Allreduce), for comparison with
// the allreduce composed of copy and sum ops in graphs/. One op per rank, all with the same
// name suffix. Asynchronous: the dispatcher starts it as MPI_Iallreduce on the op's executor
// (on the MPI executor when MPI allows one calling thread), in the same order on every rank, and
// polls it; compute() runs it to completion for callers outside the dispatcher. Inputs: x;
// outputs: y of x's shape. Not differentiable.
#pragma once

#include "operators/operator.hpp"

namespace purine {

class MpiAllreduceOp : public TypedOperator<MpiAllreduceOp, SameShapeOp> {
 public:
  static constexpr char kType[] = "mpi_allreduce";
  static constexpr char kSignature[] = "x -> y = the sum of x over every MPI rank";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 1; }
  OperatorTraits traits() const override {
    OperatorTraits t;
    t.communicates = t.ordered_across_ranks = true;
    return t;
  }
  std::unique_ptr<AsyncWork> bind_async(const std::vector<const Tensor*>& inputs,
                                        const std::vector<Tensor*>& outputs,
                                        const OpContext& context) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

}  // namespace purine
