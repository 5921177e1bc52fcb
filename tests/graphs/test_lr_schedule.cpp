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
  LrScheduleOptions negative = options_for(LrPolicy::kFixed);
  negative.base_lr = -0.1;
  REQUIRE_THROWS_WITH(LrSchedule(negative), Catch::Contains("base_lr is -0.1"));
  REQUIRE_THROWS_WITH(LrSchedule(options_for(LrPolicy::kFixed)).at(-1),
                      Catch::Contains("iteration is -1"));
}
