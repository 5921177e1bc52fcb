// A numeric gradient checker for operators, public so that an operator written outside Purine
// is checked the way Purine's own are (docs/GUIDE.md, "Adding an operator"). It runs the
// operator forward at a location (the CPU or a GPU), then the ops of its declared GradientSpec,
// and compares each input gradient with central differences of L = sum_j <r_j, y_j> for fixed
// random r_j (so dL/dy_j = r_j). One call per operator:
//
//   GradientCheckResult result = check_operator_gradient("relu", {}, {x});
//   if (!result.passed()) std::cerr << result.describe();
//
// It is a test tool: it reruns the forward pass twice per probed element. Not thread-safe with
// respect to the tensors passed in (it only reads them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/location.hpp"
#include "base/tensor.hpp"
#include "operators/attrs.hpp"

namespace purine {

struct GradientCheckOptions {
  double step = 1e-3;
  double tolerance = 1e-2;  // relative to max(1, |analytic|, |numeric|)
  // Outputs that feed the loss; empty means all.
  std::vector<int> loss_outputs;
  // Inputs whose gradient is checked; empty means every input the spec produces a gradient for.
  std::vector<int> checked_inputs;
  // Largest number of elements probed per input (evenly spaced over bigger tensors).
  int max_probes = 200;
  uint64_t seed = 7;
  // Where the operator and its gradient ops run; a GPU location needs the CUDA backend.
  Location location = Location::cpu();
};

struct GradientMismatch {
  int input = 0;
  int64_t element = 0;
  double analytic = 0;
  double numeric = 0;
};

struct GradientCheckResult {
  std::string op_type;
  Location location;
  int64_t probes = 0;      // elements compared, over all checked inputs
  double worst_error = 0;  // largest |analytic - numeric| / max(1, |analytic|, |numeric|)
  std::vector<GradientMismatch> mismatches;  // probes beyond the tolerance (NaN counts)

  bool passed() const { return probes > 0 && mismatches.empty(); }
  // One line per mismatch (the first 10), after a summary line.
  std::string describe() const;
};

// Checks the gradient of operator `type` at the given host inputs (copied to options.location).
// Throws purine::Error if the operator is unknown or not differentiable, if a checked input has
// no gradient in its spec, or if the location has no device.
GradientCheckResult check_operator_gradient(const std::string& type, const Attrs& attrs,
                                            const std::vector<Tensor>& inputs,
                                            const GradientCheckOptions& options = {});

}  // namespace purine
