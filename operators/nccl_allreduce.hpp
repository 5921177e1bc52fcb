// nccl_allreduce: y = the sum of x over every MPI rank, reduced by NCCL between the ranks' GPUs
// (one GPU location per rank), for comparison with the graph-composed ring and MPI_Allreduce.
// One op per rank, all in the same order. Its GPU kernel (operators/cuda/nccl_allreduce.cpp)
// queues ncclAllReduce on the op's stream; the NCCL communicator over the graph's MPI
// communicator is made by prepare(), which the compile step calls on every rank in the same
// order, so runs make no MPI call. Inputs: x; outputs: y of x's shape, on a GPU (a CPU location
// is a purine::Error: use mpi_allreduce there). Not differentiable.
#pragma once

#include "operators/operator.hpp"

namespace purine {

class NcclAllreduceOp : public TypedOperator<NcclAllreduceOp, SameShapeOp> {
 public:
  static constexpr char kType[] = "nccl_allreduce";
  static constexpr char kSignature[] = "x -> y = the sum of x over every rank's GPU";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 1; }
  OperatorTraits traits() const override {
    OperatorTraits t;
    t.ordered_across_ranks = true;
    return t;
  }

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

}  // namespace purine
