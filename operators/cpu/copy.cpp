#include "operators/copy.hpp"

#include <cstring>

#include "base/device_runtime.hpp"
#include "base/error.hpp"
#include "operators/registry.hpp"

namespace purine {

void CopyOp::copy(const Tensor& from, Tensor& to) {
  require(from.shape() == to.shape(), "copy: shapes ", from.shape(), " and ", to.shape(),
          " differ");
  if (from.location().is_cpu() && to.location().is_cpu()) {
    to.copy_from(from);
    return;
  }
  // An emulated device's memory is host memory; this runs in its queue's order.
  const DeviceRuntime* runtime = device_runtime();
  if (!runtime || !runtime->kernels_on_host())  // the message only when it fails
    throw Error(str("copy from ", from.location(), " to ", to.location(),
                    ": GPU copies need the CUDA backend: ", device_backend_problem()));
  require(from.is_contiguous() && to.is_contiguous(), "copy from ", from.location(), " to ",
          to.location(), ": a device copy needs contiguous tensors (shape ", from.shape(), ")");
  std::memcpy(to.mutable_data(), from.data(), static_cast<size_t>(from.count()) * sizeof(float));
}

void CopyOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                         const std::vector<Tensor*>& outputs, OpContext&) {
  copy(*inputs[0], *outputs[0]);
}

PURINE_REGISTER_OPERATOR(CopyOp);

}  // namespace purine
