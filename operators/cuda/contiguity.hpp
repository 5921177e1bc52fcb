// The GPU kernels read and write dense memory: every tensor of theirs must be contiguous.
#pragma once

#include <vector>

#include "base/error.hpp"
#include "base/tensor.hpp"

namespace purine::cuda {

// Throws purine::Error naming the op type and the first strided input or output.
inline void require_contiguous_gpu(const char* type, const std::vector<const Tensor*>& inputs,
                                   const std::vector<Tensor*>& outputs) {
  for (size_t i = 0; i < inputs.size(); ++i)
    require(inputs[i]->is_contiguous(), type, ": input ", i, " is a strided view of shape ",
            inputs[i]->shape(), "; the GPU kernel needs contiguous tensors");
  for (size_t i = 0; i < outputs.size(); ++i)
    require(outputs[i]->is_contiguous(), type, ": output ", i, " is a strided view of shape ",
            outputs[i]->shape(), "; the GPU kernel needs contiguous tensors");
}

}  // namespace purine::cuda
