// LrSchedule: the learning rate as a function of the iteration, Caffe's policies.
//   kFixed: base_lr
//   kStep:  base_lr * gamma ^ floor(iteration / step_size)
//   kPoly:  base_lr * (1 - iteration / max_iter) ^ power; 0 from iteration max_iter on.
// The constructor validates the options and throws purine::Error naming the option, its value
// and what is expected. A value type; immutable and thread-safe after construction. The names
// users type for the policies ("fixed", "step", "poly") are parsed in train/options.hpp.
//   LrScheduleOptions options;
//   options.policy = LrPolicy::kStep;
//   options.base_lr = 0.1;
//   options.step_size = 1000;
//   double lr = LrSchedule(options).at(iteration);
#pragma once

#include <cstdint>

namespace purine {

enum class LrPolicy { kFixed, kStep, kPoly };

struct LrScheduleOptions {
  LrPolicy policy = LrPolicy::kFixed;
  double base_lr = 0.01;  // >= 0
  double gamma = 0.1;     // step: the factor per step, > 0
  int64_t step_size = 1;  // step: iterations per step, > 0
  int64_t max_iter = 1;   // poly: the iteration where the rate reaches 0, > 0
  double power = 1.0;     // poly: the exponent, >= 0
};

class LrSchedule {
 public:
  explicit LrSchedule(LrScheduleOptions options);

  // The learning rate at `iteration` (>= 0; a negative one throws purine::Error).
  double at(int64_t iteration) const;
  const LrScheduleOptions& options() const { return options_; }

 private:
  LrScheduleOptions options_;
};

}  // namespace purine
