// LrSchedule: the learning rate as a function of the iteration.
//   kFixed:     base_lr
//   kStep:      base_lr * gamma ^ floor(iteration / step_size)
//   kMultistep: base_lr * gamma ^ (the number of milestones <= iteration; repeats count)
//   kPoly:      base_lr * (1 - iteration / max_iter) ^ power; 0 from iteration max_iter on
//   kCosine:    base_lr * (1 + cos(pi * iteration / max_iter)) / 2; 0 from max_iter on
// A linear warmup multiplies any of them: over the first `warmup_iters` iterations the factor
// rises from `warmup_start_factor` to 1, start + (1 - start) * iteration / warmup_iters (the
// formulas of PyTorch's StepLR, MultiStepLR, PolynomialLR, CosineAnnealingLR with eta_min 0 and
// LinearLR, chained). The constructor validates the options and throws purine::Error naming the
// option, its value and what is expected. A value type; immutable and thread-safe after
// construction. The names users type for the policies are parsed in train/options.hpp.
//   LrScheduleOptions options;
//   options.policy = LrPolicy::kMultistep;
//   options.base_lr = 0.05;
//   options.milestones = {600, 850};
//   double lr = LrSchedule(options).at(iteration);
#pragma once

#include <cstdint>
#include <vector>

namespace purine {

enum class LrPolicy { kFixed, kStep, kMultistep, kPoly, kCosine };

struct LrScheduleOptions {
  LrPolicy policy = LrPolicy::kFixed;
  double base_lr = 0.01;             // >= 0
  double gamma = 0.1;                // step, multistep: the factor per step, > 0
  int64_t step_size = 1;             // step: iterations per step, > 0
  std::vector<int64_t> milestones;   // multistep: non-decreasing iterations, >= 0
  int64_t max_iter = 1;              // poly, cosine: the iteration where the rate reaches 0, > 0
  double power = 1.0;                // poly: the exponent, >= 0
  int64_t warmup_iters = 0;          // 0: no warmup
  double warmup_start_factor = 0.1;  // in (0, 1]
};

class LrSchedule {
 public:
  explicit LrSchedule(LrScheduleOptions options);

  // The learning rate at `iteration` (>= 0; a negative one throws purine::Error).
  double at(int64_t iteration) const;
  const LrScheduleOptions& options() const { return options_; }

 private:
  double decayed(int64_t iteration) const;  // the policy alone, without the warmup

  LrScheduleOptions options_;
};

}  // namespace purine
