#include <catch2/catch.hpp>

#include "base/error.hpp"
#include "graphs/lr_schedule.hpp"

using namespace purine;

namespace {
LrScheduleOptions options_for(LrPolicy policy) {
  LrScheduleOptions o;
  o.policy = policy;
  o.base_lr = 0.1;
  return o;
}
}  // namespace

TEST_CASE("fixed schedule keeps the base rate", "[lr_schedule]") {
  LrSchedule s(options_for(LrPolicy::kFixed));
  CHECK(s.at(0) == 0.1);
  CHECK(s.at(123456) == 0.1);
}

TEST_CASE("step schedule multiplies by gamma every step_size iterations", "[lr_schedule]") {
  LrScheduleOptions o = options_for(LrPolicy::kStep);
  o.gamma = 0.5;
  o.step_size = 10;
  LrSchedule s(o);
  CHECK(s.at(0) == Approx(0.1));
  CHECK(s.at(9) == Approx(0.1));
  CHECK(s.at(10) == Approx(0.05));
  CHECK(s.at(29) == Approx(0.025));
  CHECK(s.at(30) == Approx(0.0125));
}

TEST_CASE("poly schedule decays to zero at max_iter", "[lr_schedule]") {
  LrScheduleOptions o = options_for(LrPolicy::kPoly);
  o.max_iter = 100;
  o.power = 2.0;
  LrSchedule s(o);
  CHECK(s.at(0) == Approx(0.1));
  CHECK(s.at(50) == Approx(0.1 * 0.25));
  CHECK(s.at(90) == Approx(0.1 * 0.01));
  CHECK(s.at(100) == 0.0);
  CHECK(s.at(150) == 0.0);
}

TEST_CASE("multistep schedule multiplies by gamma at each milestone", "[lr_schedule]") {
  // PyTorch's MultiStepLR(milestones=[3, 6, 6], gamma=0.5): a repeated milestone counts twice.
  LrScheduleOptions o = options_for(LrPolicy::kMultistep);
  o.gamma = 0.5;
  o.milestones = {3, 6, 6};
  LrSchedule s(o);
  CHECK(s.at(0) == Approx(0.1));
  CHECK(s.at(2) == Approx(0.1));
  CHECK(s.at(3) == Approx(0.05));
  CHECK(s.at(5) == Approx(0.05));
  CHECK(s.at(6) == Approx(0.0125));
  CHECK(s.at(1000) == Approx(0.0125));
}

TEST_CASE("cosine schedule follows half a cosine to zero at max_iter", "[lr_schedule]") {
  // PyTorch's CosineAnnealingLR(T_max=8, eta_min=0) in closed form:
  // 0.1 * (1 + cos(pi * t / 8)) / 2 at t = 0, 2, 4, 6, 8.
  LrScheduleOptions o = options_for(LrPolicy::kCosine);
  o.max_iter = 8;
  LrSchedule s(o);
  CHECK(s.at(0) == Approx(0.1));
  CHECK(s.at(2) == Approx(0.0853553390593));
  CHECK(s.at(4) == Approx(0.05));
  CHECK(s.at(6) == Approx(0.0146446609407));
  CHECK(s.at(8) == 0.0);
  CHECK(s.at(9) == 0.0);
}

TEST_CASE("linear warmup multiplies any policy over its first iterations", "[lr_schedule]") {
  // PyTorch's LinearLR(start_factor=0.25, total_iters=4) chained with MultiStepLR([2], 0.1):
  // factors 0.25, 0.4375, 0.625, 0.8125, then 1.
  LrScheduleOptions o = options_for(LrPolicy::kMultistep);
  o.milestones = {2};
  o.warmup_iters = 4;
  o.warmup_start_factor = 0.25;
  LrSchedule s(o);
  CHECK(s.at(0) == Approx(0.025));
  CHECK(s.at(1) == Approx(0.04375));
  CHECK(s.at(2) == Approx(0.00625));
  CHECK(s.at(3) == Approx(0.008125));
  CHECK(s.at(4) == Approx(0.01));
  CHECK(s.at(100) == Approx(0.01));
}

TEST_CASE("invalid schedule options name the option and value", "[lr_schedule]") {
  // Names ("cosine") are parsed, and unknown ones refused, in train/options.hpp.
  REQUIRE_THROWS_WITH(LrSchedule(options_for(static_cast<LrPolicy>(7))),
                      Catch::Contains("unknown policy 7"));
  LrScheduleOptions step = options_for(LrPolicy::kStep);
  step.step_size = 0;
  REQUIRE_THROWS_WITH(LrSchedule(step), Catch::Contains("step_size is 0"));
  LrScheduleOptions poly = options_for(LrPolicy::kPoly);
  poly.max_iter = -5;
  REQUIRE_THROWS_WITH(LrSchedule(poly), Catch::Contains("max_iter is -5"));
  LrScheduleOptions multistep = options_for(LrPolicy::kMultistep);
  REQUIRE_THROWS_WITH(LrSchedule(multistep), Catch::Contains("at least one milestone"));
  multistep.milestones = {5, 3};
  REQUIRE_THROWS_WITH(LrSchedule(multistep),
                      Catch::Contains("milestone 1 (3) comes before milestone 0 (5)"));
  LrScheduleOptions warmup = options_for(LrPolicy::kCosine);
  warmup.warmup_start_factor = 0;
  REQUIRE_THROWS_WITH(LrSchedule(warmup), Catch::Contains("warmup_start_factor is 0"));
  warmup.warmup_start_factor = 0.5;
  warmup.warmup_iters = -1;
  REQUIRE_THROWS_WITH(LrSchedule(warmup), Catch::Contains("warmup_iters is -1"));
  LrScheduleOptions negative = options_for(LrPolicy::kFixed);
  negative.base_lr = -0.1;
  REQUIRE_THROWS_WITH(LrSchedule(negative), Catch::Contains("base_lr is -0.1"));
  REQUIRE_THROWS_WITH(LrSchedule(options_for(LrPolicy::kFixed)).at(-1),
                      Catch::Contains("iteration is -1"));
}
