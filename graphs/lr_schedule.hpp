// LrSchedule: the learning rate as a function of the iteration, Caffe's policies.
//   "fixed": base_lr
//   "step":  base_lr * gamma ^ floor(iteration / step_size)
//   "poly":  base_lr * (1 - iteration / max_iter) ^ power; 0 from iteration max_iter on.
// The constructor validates the options and throws purine::Error naming the option, its value
// and what is expected. A value type; immutable and thread-safe after construction.
//   LrScheduleOptions options;
//   options.policy = "step";
//   options.base_lr = 0.1;
//   options.step_size = 1000;
//   double lr = LrSchedule(options).at(iteration);
#pragma once

#include <cstdint>
#include <string>

namespace purine {

struct LrScheduleOptions {
  std::string policy = "fixed";  // "fixed", "step" or "poly"
  double base_lr = 0.01;         // >= 0
  double gamma = 0.1;            // step: the factor per step, > 0
  int64_t step_size = 1;         // step: iterations per step, > 0
  int64_t max_iter = 1;          // poly: the iteration where the rate reaches 0, > 0
  double power = 1.0;            // poly: the exponent, >= 0
};

class LrSchedule {
 public:
  explicit LrSchedule(LrScheduleOptions options);

  // The learning rate at `iteration` (>= 0; a negative one throws purine::Error).
  double at(int64_t iteration) const;
  const LrScheduleOptions& options() const { return options_; }

 private:
  enum class Policy { kFixed, kStep, kPoly };
  LrScheduleOptions options_;
  Policy policy_;
};

}  // namespace purine
