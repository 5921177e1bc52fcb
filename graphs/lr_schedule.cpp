#include "graphs/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

#include "base/error.hpp"

namespace purine {

namespace {

constexpr double kPi = 3.14159265358979323846;

void check_milestones(const std::vector<int64_t>& milestones) {
  require(!milestones.empty(),
          "learning rate schedule: the 'multistep' policy needs at least one milestone");
  for (size_t i = 0; i < milestones.size(); ++i) {
    require(milestones[i] >= 0, "learning rate schedule: milestone ", i, " is ", milestones[i],
            "; expected an iteration >= 0");
    if (i > 0)  // (require evaluates its message: no milestones[-1])
      require(milestones[i] >= milestones[i - 1], "learning rate schedule: milestone ", i, " (",
              milestones[i], ") comes before milestone ", i - 1, " (", milestones[i - 1],
              "); expected non-decreasing iterations");
  }
}

}  // namespace

LrSchedule::LrSchedule(LrScheduleOptions options) : options_(std::move(options)) {
  const LrScheduleOptions& o = options_;
  require(o.base_lr >= 0.0, "learning rate schedule: base_lr is ", o.base_lr,
          "; expected a rate >= 0");
  require(o.warmup_iters >= 0, "learning rate schedule: warmup_iters is ", o.warmup_iters,
          "; expected >= 0");
  require(o.warmup_start_factor > 0.0 && o.warmup_start_factor <= 1.0,
          "learning rate schedule: warmup_start_factor is ", o.warmup_start_factor,
          "; expected a factor in (0, 1]");
  const bool has_gamma = o.policy == LrPolicy::kStep || o.policy == LrPolicy::kMultistep;
  const bool has_max_iter = o.policy == LrPolicy::kPoly || o.policy == LrPolicy::kCosine;
  switch (o.policy) {
    case LrPolicy::kFixed:
    case LrPolicy::kCosine:
      break;
    case LrPolicy::kStep:
      require(o.step_size > 0, "learning rate schedule: step_size is ", o.step_size,
              "; the 'step' policy needs step_size > 0");
      break;
    case LrPolicy::kMultistep:
      check_milestones(o.milestones);
      break;
    case LrPolicy::kPoly:
      require(o.power >= 0.0, "learning rate schedule: power is ", o.power,
              "; the 'poly' policy needs power >= 0");
      break;
    default:
      throw Error(str("learning rate schedule: unknown policy ", static_cast<int>(o.policy),
                      "; expected fixed, step, multistep, poly or cosine"));
  }
  require(!has_gamma || o.gamma > 0.0, "learning rate schedule: gamma is ", o.gamma,
          "; the step policies need gamma > 0");
  require(!has_max_iter || o.max_iter > 0, "learning rate schedule: max_iter is ", o.max_iter,
          "; the 'poly' and 'cosine' policies need max_iter > 0");
}

double LrSchedule::decayed(int64_t iteration) const {
  const LrScheduleOptions& o = options_;
  switch (o.policy) {
    case LrPolicy::kFixed:
      return o.base_lr;
    case LrPolicy::kStep:
      return o.base_lr * std::pow(o.gamma, static_cast<double>(iteration / o.step_size));
    case LrPolicy::kMultistep: {
      const auto passed = std::upper_bound(o.milestones.begin(), o.milestones.end(), iteration) -
                          o.milestones.begin();
      return o.base_lr * std::pow(o.gamma, static_cast<double>(passed));
    }
    case LrPolicy::kPoly: {
      if (iteration >= o.max_iter) return 0.0;
      const double remaining = 1.0 - static_cast<double>(iteration) / o.max_iter;
      return o.base_lr * std::pow(remaining, o.power);
    }
    case LrPolicy::kCosine:
      if (iteration >= o.max_iter) return 0.0;
      return o.base_lr * 0.5 * (1.0 + std::cos(kPi * static_cast<double>(iteration) / o.max_iter));
  }
  return o.base_lr;
}

double LrSchedule::at(int64_t iteration) const {
  require(iteration >= 0, "learning rate schedule: iteration is ", iteration, "; expected >= 0");
  const LrScheduleOptions& o = options_;
  double rate = decayed(iteration);
  if (iteration < o.warmup_iters) {
    const double progress = static_cast<double>(iteration) / o.warmup_iters;
    rate *= o.warmup_start_factor + (1.0 - o.warmup_start_factor) * progress;
  }
  return rate;
}

}  // namespace purine
