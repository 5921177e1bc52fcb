// Dropout's counter-based stream (operators/counter_rng.hpp): a pure
// function of (key, index), uniform enough for masks, and different keys give different streams.
#include <catch2/catch.hpp>
#include <cstdint>

#include "operators/counter_rng.hpp"

using namespace purine;

TEST_CASE("the counter-based stream is a uniform function of key and index", "[dropout][rng]") {
  constexpr int kDraws = 200000;
  double sum = 0;
  int below_half = 0, same_as_other_key = 0;
  for (int i = 0; i < kDraws; ++i) {
    const float u = counter_uniform01(42, i);
    REQUIRE(u >= 0.0f);
    REQUIRE(u < 1.0f);
    sum += u;
    below_half += u < 0.5f;
    same_as_other_key += u == counter_uniform01(43, i);
    REQUIRE(u == counter_uniform01(42, i));  // replayed exactly
  }
  CHECK(sum / kDraws == Approx(0.5).margin(0.005));
  CHECK(below_half == Approx(kDraws / 2).margin(kDraws / 100));
  CHECK(same_as_other_key < 50);
}
