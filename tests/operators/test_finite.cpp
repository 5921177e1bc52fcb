// count_non_finite (operators/finite.hpp): the trainer's cheap divergence check.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "operators/compute_threads.hpp"
#include "operators/registry.hpp"
#include "tests/operators/gradient_test.hpp"

using namespace purine;
using namespace purine::testing;

TEST_CASE("count_non_finite counts NaN and infinities over all its inputs", "[finite][isa]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const float biggest = std::numeric_limits<float>::max();
  const float tiny = std::numeric_limits<float>::denorm_min();
  const Tensor finite = tensor_of({2, 3}, {0.0f, -0.0f, biggest, -biggest, tiny, 1.0f});
  CHECK(*run_forward("count_non_finite", {}, {finite})[0].data() == 0.0f);
  const Tensor bad = tensor_of({5}, {1.0f, nan, inf, -inf, -nan});
  CHECK(*run_forward("count_non_finite", {}, {bad})[0].data() == 4.0f);
  // Every input counts, and the count is their sum.
  const Tensor one = tensor_of({1}, {inf});
  CHECK(*run_forward("count_non_finite", {}, {finite, bad, one, bad})[0].data() == 9.0f);
  // A long input: the vectorized loop and its tail.
  Tensor long_input(Shape{1027}, Location::cpu());
  long_input.fill(0.5f);
  long_input.mutable_data()[0] = nan;
  long_input.mutable_data()[1026] = -inf;
  CHECK(*run_forward("count_non_finite", {}, {long_input})[0].data() == 2.0f);
  CHECK_THROWS_WITH(run_forward("count_non_finite", {}, {}),
                    Catch::Contains("count_non_finite: expected at least one input, got none"));
}

TEST_CASE("count_non_finite counts a long input in blocks on several threads alike", "[finite]") {
  // Three blocks of 65,536 and a tail, with non-finite values on both sides of each boundary.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const int64_t n = 3 * 65536 + 17;
  Tensor x(Shape{n}, Location::cpu());
  x.fill(-2.0f);
  for (int64_t i : {int64_t{0}, int64_t{65535}, int64_t{65536}, int64_t{131072}, n - 1})
    x.mutable_data()[i] = i % 2 ? nan : -inf;
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    INFO(threads << " threads");
    set_compute_threads(threads);
    CHECK(*run_forward("count_non_finite", {}, {x})[0].data() == 5.0f);
  }
  set_compute_threads(saved);
}
