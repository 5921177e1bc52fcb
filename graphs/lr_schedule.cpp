#include "graphs/lr_schedule.hpp"

#include <cmath>

#include "base/error.hpp"

namespace purine {

LrSchedule::LrSchedule(LrScheduleOptions options) : options_(std::move(options)) {
  const LrScheduleOptions& o = options_;
  require(o.base_lr >= 0.0, "learning rate schedule: base_lr is ", o.base_lr,
          "; expected a rate >= 0");
  switch (o.policy) {
    case LrPolicy::kFixed:
      return;
    case LrPolicy::kStep:
      require(o.step_size > 0, "learning rate schedule: step_size is ", o.step_size,
              "; the 'step' policy needs step_size > 0");
      require(o.gamma > 0.0, "learning rate schedule: gamma is ", o.gamma,
              "; the 'step' policy needs gamma > 0");
      return;
    case LrPolicy::kPoly:
      require(o.max_iter > 0, "learning rate schedule: max_iter is ", o.max_iter,
              "; the 'poly' policy needs max_iter > 0");
      require(o.power >= 0.0, "learning rate schedule: power is ", o.power,
              "; the 'poly' policy needs power >= 0");
      return;
  }
  throw Error(str("learning rate schedule: unknown policy ", static_cast<int>(o.policy),
                  "; expected fixed, step or poly"));
}

double LrSchedule::at(int64_t iteration) const {
  require(iteration >= 0, "learning rate schedule: iteration is ", iteration, "; expected >= 0");
  const LrScheduleOptions& o = options_;
  switch (o.policy) {
    case LrPolicy::kFixed:
      return o.base_lr;
    case LrPolicy::kStep:
      return o.base_lr * std::pow(o.gamma, static_cast<double>(iteration / o.step_size));
    case LrPolicy::kPoly: {
      if (iteration >= o.max_iter) return 0.0;
      const double remaining = 1.0 - static_cast<double>(iteration) / o.max_iter;
      return o.base_lr * std::pow(remaining, o.power);
    }
  }
  return o.base_lr;
}

}  // namespace purine
