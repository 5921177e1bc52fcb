#include "operators/cpu/contiguity.hpp"

#include "base/error.hpp"

namespace purine {

void require_contiguous(const std::string& type, const std::vector<const Tensor*>& inputs,
                        const std::vector<Tensor*>& outputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    require(inputs[i]->is_contiguous(), type, ": input ", i, " is a strided view of shape ",
            inputs[i]->shape(), "; this kernel needs contiguous tensors");
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    require(outputs[i]->is_contiguous(), type, ": output ", i, " is a strided view of shape ",
            outputs[i]->shape(), "; this kernel needs contiguous tensors");
  }
}

}  // namespace purine
