#include <catch2/catch.hpp>
#include <cmath>

#include "operators/registry.hpp"
#include "tests/operators/gradient_test.hpp"

using namespace purine;
using namespace purine::testing;

namespace {

struct Stats {
  double mean, std, min, max;
};

Stats stats_of(const Tensor& t) {
  double sum = 0, sq = 0, lo = t.data()[0], hi = t.data()[0];
  for (int64_t i = 0; i < t.count(); ++i) {
    const double v = t.data()[i];
    sum += v;
    sq += v * v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  const double mean = sum / t.count();
  return {mean, std::sqrt(sq / t.count() - mean * mean), lo, hi};
}

Attrs with_shape(std::vector<int64_t> shape) { return Attrs().set("shape", std::move(shape)); }

// Runs `type` twice with one seed and once with another; checks the repeat is bit-identical.
Tensor fill_and_check_repeat(const std::string& type, const Attrs& attrs) {
  Tensor a = run_forward(type, attrs, {}, 21)[0];
  Tensor b = run_forward(type, attrs, {}, 21)[0];
  Tensor c = run_forward(type, attrs, {}, 22)[0];
  bool differs = false;
  for (int64_t i = 0; i < a.count(); ++i) {
    REQUIRE(a.data()[i] == b.data()[i]);
    differs |= a.data()[i] != c.data()[i];
  }
  CHECK(differs);
  return a;
}

}  // namespace

TEST_CASE("fill_constant writes the value", "[fill]") {
  Tensor y = run_forward("fill_constant", with_shape({2, 3}).set("value", 1.5), {})[0];
  REQUIRE(y.shape() == Shape{2, 3});
  for (int i = 0; i < 6; ++i) CHECK(y.data()[i] == 1.5f);
  Tensor scalar = run_forward("fill_constant", with_shape({}).set("value", -2.0), {})[0];
  REQUIRE(scalar.shape() == Shape{});
  CHECK(scalar.data()[0] == -2.0f);
  CHECK_FALSE(OperatorRegistry::create("fill_constant", with_shape({1}))->uses_rng());
}

TEST_CASE("fill_uniform has the uniform's statistics", "[fill]") {
  Tensor y = fill_and_check_repeat("fill_uniform",
                                   with_shape({200, 250}).set("low", -1.0).set("high", 3.0));
  Stats s = stats_of(y);
  CHECK(s.mean == Approx(1.0).margin(0.03));
  CHECK(s.std == Approx(4.0 / std::sqrt(12.0)).epsilon(0.02));
  CHECK(s.min >= -1.0);
  CHECK(s.max < 3.0);
  // One draw per element in element order.
  Rng rng(21);
  for (int i = 0; i < 10; ++i) CHECK(y.data()[i] == rng.uniform(-1.0f, 3.0f));
}

TEST_CASE("fill_gaussian has the normal's statistics", "[fill]") {
  Tensor y = fill_and_check_repeat("fill_gaussian",
                                   with_shape({200, 250}).set("mean", 2.0).set("std", 0.5));
  Stats s = stats_of(y);
  CHECK(s.mean == Approx(2.0).margin(0.01));
  CHECK(s.std == Approx(0.5).epsilon(0.02));
}

TEST_CASE("fill_xavier uses the Glorot bound", "[fill]") {
  // A convolution weight [out = 200, in = 100, 3, 3]: fan_in = 100*3*3, fan_out = 200*3*3.
  Tensor y = fill_and_check_repeat("fill_xavier", with_shape({200, 100, 3, 3}));
  const double bound = std::sqrt(6.0 / (900 + 1800));
  Stats s = stats_of(y);
  CHECK(s.mean == Approx(0.0).margin(0.01 * bound));
  CHECK(s.std == Approx(bound / std::sqrt(3.0)).epsilon(0.02));
  CHECK(s.min >= -bound);
  CHECK(s.max < bound);
  CHECK(s.max > 0.99 * bound);
}

TEST_CASE("fill_kaiming uses std sqrt(2 / fan_in)", "[fill]") {
  // An inner-product weight [out = 300, in = 200]: fan_in = 200.
  Tensor y = fill_and_check_repeat("fill_kaiming", with_shape({300, 200}));
  Stats s = stats_of(y);
  CHECK(s.mean == Approx(0.0).margin(0.002));
  CHECK(s.std == Approx(std::sqrt(2.0 / 200)).epsilon(0.02));
}

TEST_CASE("fill ops reject bad attributes and inputs", "[fill]") {
  REQUIRE_THROWS_WITH(OperatorRegistry::create("fill_gaussian"),
                      Catch::Contains("fill_gaussian: missing attribute 'shape'"));
  REQUIRE_THROWS_WITH(OperatorRegistry::create("fill_uniform", with_shape({2, -1})),
                      Catch::Contains("extent -1 at position 1"));
  REQUIRE_THROWS_WITH(
      OperatorRegistry::create("fill_uniform", with_shape({2}).set("low", 1.0).set("high", 0.0)),
      Catch::Contains("expected low <= high"));
  REQUIRE_THROWS_WITH(OperatorRegistry::create("fill_gaussian", with_shape({2}).set("std", -1.0)),
                      Catch::Contains("'std' is -1"));
  REQUIRE_THROWS_WITH(run_forward("fill_constant", with_shape({2}), {Tensor({2})}),
                      Catch::Contains("expected 0 inputs, got 1"));
}
