// A numeric gradient checker for operators (after caffe's GradientChecker). It runs the
// operator forward, then its declared GradientSpec on tensors directly, and compares each input
// gradient with central differences of L = sum_j <r_j, y_j> for fixed random r_j.
// One call per operator test:
//   check_gradient("relu", {}, {random_tensor({2, 3}, rng)});
#pragma once

#include <string>
#include <vector>

#include "base/rng.hpp"
#include "base/tensor.hpp"
#include "operators/operator.hpp"

namespace purine::testing {

struct GradientCheckOptions {
  double step = 1e-3;
  double tolerance = 1e-2;  // relative to max(1, |analytic|, |numeric|)
  // Outputs that feed the loss; empty means all.
  std::vector<int> loss_outputs;
  // Inputs whose gradient is checked; empty means every input the spec produces a gradient for.
  std::vector<int> checked_inputs;
  // Largest number of elements probed per input (a deterministic sample of bigger tensors).
  int max_probes = 200;
  uint64_t seed = 7;
};

// Runs the check; on failure reports through Catch2 (CHECK) naming the input and element.
void check_gradient(const std::string& type, const Attrs& attrs, std::vector<Tensor> inputs,
                    const GradientCheckOptions& options = {});

// Helpers for building test inputs.
Tensor random_tensor(const Shape& shape, Rng& rng, float low = -1.0f, float high = 1.0f);
Tensor tensor_of(const Shape& shape, const std::vector<float>& values);

// Runs one operator forward on CPU tensors and returns its outputs.
std::vector<Tensor> run_forward(const std::string& type, const Attrs& attrs,
                                const std::vector<Tensor>& inputs, uint64_t rng_seed = 7);

}  // namespace purine::testing
