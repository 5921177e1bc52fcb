// The interleaved zero-bubble schedule (graphs/zero_bubble_interleaved.hpp): every pass once, a
// run that its orders allow, no more activations held than interleaved 1F1B holds, and less
// idle time.
#include <catch2/catch.hpp>
#include <map>
#include <vector>

#include "graphs/zero_bubble_interleaved.hpp"

using namespace purine;

namespace {
const Pass F = Pass::kForward, B = Pass::kBackward, W = Pass::kWeight;
using Steps = std::vector<PipelineStep>;
}  // namespace

TEST_CASE("interleaved zero bubble: two locations, two chunks, two micro-batches, by hand",
          "[pipeline]") {
  // Stages 0 and 2 at location 0, 1 and 3 at location 1. Location 0 may hold 4 chunks'
  // activations (its 1F1B warm-up (2-1)*2 + 2*(2-1-0) = 4, plus one, but only 4 exist), location
  // 1 three: it takes micro-batch 0's B and W through stage 3 before micro-batch 1's forward
  // through it. Location 0 idles once (round 4: all four forwards held, no gradient back yet).
  const ZeroBubbleOrders z = zero_bubble_interleaved(2, 2, 2);
  CHECK(z.orders[0] == Steps{{F, 0, 0},
                             {F, 1, 0},
                             {F, 0, 1},
                             {F, 1, 1},
                             {B, 0, 1},
                             {W, 0, 1},
                             {B, 0, 0},
                             {W, 0, 0},
                             {B, 1, 1},
                             {W, 1, 1},
                             {B, 1, 0},
                             {W, 1, 0}});
  CHECK(z.orders[1] == Steps{{F, 0, 0},
                             {F, 1, 0},
                             {F, 0, 1},
                             {B, 0, 1},
                             {W, 0, 1},
                             {B, 0, 0},
                             {F, 1, 1},
                             {B, 1, 1},
                             {W, 0, 0},
                             {B, 1, 0},
                             {W, 1, 1},
                             {W, 1, 0}});
  CHECK(z.length == 13);
  CHECK(bubble_theory(PipelineSchedule::kZBH1, 2, 2, 2) == Approx(1 - 12.0 / 13));
}

TEST_CASE(
    "interleaved zero bubble: every pass once, in an order a run allows, within 1F1B's "
    "memory and with less idle time",
    "[pipeline]") {
  for (int S = 1; S <= 5; ++S)
    for (int V = 2; V <= 3; ++V)
      for (int M = 1; M <= 3 * S; ++M) {
        INFO(S << " locations, " << V << " chunks, " << M << " micro-batches");
        const ZeroBubbleOrders z = zero_bubble_interleaved(S, M, V);
        REQUIRE(static_cast<int>(z.orders.size()) == S);
        for (int s = 0; s < S; ++s) {
          INFO("location " << s);
          std::map<PipelineStep, int> seen;
          int held = 0, most = 0;
          for (const PipelineStep& step : z.orders[s]) {
            ++seen[step];
            held += step.pass == F ? 1 : step.pass == W ? -1 : 0;
            most = std::max(most, held);
          }
          CHECK(seen.size() == static_cast<size_t>(3 * M * V));
          for (const auto& [step, count] : seen) CHECK(count == 1);
          CHECK(most <= std::min((V - 1) * S + 2 * (S - 1 - s) + 1, M * V));
        }
        // The orders replayed with equal stages end (none waits on another in a circle), at
        // the generator's own length: it runs them as they would run.
        const std::vector<double> costs(S * V, 3.0);  // one unit per pass
        const double time = pipeline_time(costs, PipelineRun{S, M, PipelineSchedule::kZBH1});
        CHECK(time == Approx(z.length));
        if (M % S == 0 && S > 1)
          CHECK(bubble_theory(PipelineSchedule::kZBH1, S, M, V) <
                bubble_theory(PipelineSchedule::k1F1B, S, M, V));
      }
  CHECK_THROWS_WITH(zero_bubble_interleaved(2, 0, 2),
                    Catch::Contains("needs at least 1 stage, micro-batch and chunk"));
}

TEST_CASE("interleaved zero bubble with unequal stages: a run its orders allow, of that length",
          "[pipeline]") {
  uint32_t seed = 11;
  auto next = [&seed] { return (seed = seed * 1664525u + 1013904223u) >> 16; };
  for (int trial = 0; trial < 200; ++trial) {
    const int S = 2 + static_cast<int>(next() % 4), V = 2 + static_cast<int>(next() % 2),
              M = 1 + static_cast<int>(next() % (3 * S));
    std::vector<double> costs;
    for (int j = 0; j < S * V; ++j) costs.push_back(1.0 + static_cast<double>(next() % 20));
    INFO(S << " locations, " << V << " chunks, " << M << " micro-batches, trial " << trial);
    const ZeroBubbleOrders z = zero_bubble_interleaved(S, M, V, costs);
    CHECK(pipeline_time(costs, PipelineRun{S, M, PipelineSchedule::kZBH1}) == z.length);
    for (int s = 0; s < S; ++s) {
      CHECK(z.orders[s].size() == static_cast<size_t>(3 * M * V));
      int held = 0, most = 0;
      for (const PipelineStep& step : z.orders[s]) {
        held += step.pass == F ? 1 : step.pass == W ? -1 : 0;
        most = std::max(most, held);
      }
      const int limit = std::min((V - 1) * S + 2 * (S - 1 - s) + 1, M * V);
      CHECK(most <= limit + V);  // past it only while every location waits
    }
    // The replay of its orders by schedule_order, as the trainer gets them.
    for (int s = 0; s < S; ++s)
      CHECK(schedule_order(PipelineSchedule::kZBH1, s, S, M, V, costs) == z.orders[s]);
  }
}
