// mpi_allreduce: y = the sum of x over every MPI rank (native MPI_Allreduce), for comparison with
// the allreduce composed of copy and sum ops in graphs/. One op per rank, all with the same
// name suffix; the runtime starts it as MPI_Iallreduce on the MPI executor, in the same order on
// every rank. Inputs: x; outputs: y of x's shape. Not differentiable.
#pragma once

#include "operators/operator.hpp"

namespace purine {

class MpiAllreduceOp : public Operator {
 public:
  explicit MpiAllreduceOp(Attrs attrs) : Operator(std::move(attrs)) {}
  std::string type() const override { return "mpi_allreduce"; }
  int num_inputs() const override { return 1; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override {
    return {inputs[0]};
  }

 protected:
  // Blocking MPI_Allreduce, for callers outside the dispatcher.
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

}  // namespace purine
