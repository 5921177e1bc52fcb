#include "operators/mpi_allreduce.hpp"

#include "operators/mpi/transfer.hpp"
#include "operators/registry.hpp"

namespace purine {

void MpiAllreduceOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                 const std::vector<Tensor*>& outputs, OpContext&) {
  MpiTransfer transfer;
  transfer.start_allreduce(*inputs[0], *outputs[0]);
  while (!transfer.done()) {
  }
}

PURINE_REGISTER_OPERATOR("mpi_allreduce", MpiAllreduceOp);

}  // namespace purine
