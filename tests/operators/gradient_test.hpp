// The operator tests' side of the numeric gradient checker (operators/gradient_check.hpp): one
// call per operator test, reporting through Catch2, plus helpers for building inputs.
//   check_gradient("relu", {}, {random_tensor({2, 3}, rng)});
#pragma once

#include <string>
#include <vector>

#include "base/rng.hpp"
#include "base/tensor.hpp"
#include "operators/gradient_check.hpp"
#include "operators/operator.hpp"

namespace purine::testing {

using purine::GradientCheckOptions;

// Runs check_operator_gradient and CHECKs that it passed, printing its mismatches if not.
void check_gradient(const std::string& type, const Attrs& attrs, std::vector<Tensor> inputs,
                    const GradientCheckOptions& options = {});

// Helpers for building test inputs.
Tensor random_tensor(const Shape& shape, Rng& rng, float low = -1.0f, float high = 1.0f);
Tensor tensor_of(const Shape& shape, const std::vector<float>& values);

// Runs one operator forward on CPU tensors and returns its outputs.
std::vector<Tensor> run_forward(const std::string& type, const Attrs& attrs,
                                const std::vector<Tensor>& inputs, uint64_t rng_seed = 7);
// The same with the arguments the operator takes in channel blocks of `block`
// (Operator::channel_blocking), where their channels are a multiple of it, given to it in those
// blocks: the inputs copied into blocked
// tensors, the outputs made blocked (read them with values()). `blocked` counts them.
std::vector<Tensor> run_forward_blocked(const std::string& type, const Attrs& attrs,
                                        const std::vector<Tensor>& inputs, int block,
                                        int* blocked = nullptr);

}  // namespace purine::testing
