#include "operators/nccl_allreduce.hpp"

#include "base/error.hpp"
#include "operators/registry.hpp"

namespace purine {

void NcclAllreduceOp::compute_cpu(const std::vector<const Tensor*>&,
                                  const std::vector<Tensor*>& outputs, OpContext&) {
  throw Error(str("nccl_allreduce reduces between GPUs, but its output is at ",
                  outputs[0]->location(), "; use mpi_allreduce (--reduce=mpi) on CPU locations"));
}

PURINE_REGISTER_OPERATOR(NcclAllreduceOp);

}  // namespace purine
