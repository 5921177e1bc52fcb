// The check shared by kernels that read and write their tensors as flat arrays.
#pragma once

#include <string>
#include <vector>

#include "base/tensor.hpp"

namespace purine {

// Throws purine::Error naming `type` and the tensor when an input or output is a strided view.
void require_contiguous(const std::string& type, const std::vector<const Tensor*>& inputs,
                        const std::vector<Tensor*>& outputs);

}  // namespace purine
