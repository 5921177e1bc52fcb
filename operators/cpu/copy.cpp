#include "operators/copy.hpp"

#include "base/error.hpp"
#include "operators/registry.hpp"

namespace purine {

void CopyOp::copy(const Tensor& from, Tensor& to) {
  require(from.shape() == to.shape(), "copy: shapes ", from.shape(), " and ", to.shape(),
          " differ");
  require(from.location().is_cpu() && to.location().is_cpu(), "copy from ", from.location(), " to ",
          to.location(), ": GPU copies need the CUDA backend, which this build lacks");
  to.copy_from(from);
}

void CopyOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                         const std::vector<Tensor*>& outputs, OpContext&) {
  copy(*inputs[0], *outputs[0]);
}

PURINE_REGISTER_OPERATOR(CopyOp);

}  // namespace purine
