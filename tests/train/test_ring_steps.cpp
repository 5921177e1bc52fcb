// --ring-steps=auto (train/ring_steps.hpp): the ring's own steps where they put fewer bytes on
// the busiest machine's network link than direct steps, direct otherwise.
#include <catch2/catch.hpp>
#include <vector>

#include "base/error.hpp"
#include "train/ring_steps.hpp"

using namespace purine;

TEST_CASE("ring steps are chosen where ranks are placed machine by machine", "[ring_steps]") {
  // The paper's cluster: 12 GPUs, 3 per workstation. Direct steps send 3 x 2 x 9/12 = 4.5
  // bytes per gradient byte off a workstation; the ring only its last rank's 2 x 11/12.
  const RingStepsChoice paper = choose_ring_steps({0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3});
  CHECK(paper.steps == RingSteps::kRing);
  CHECK(paper.machines == 4);
  CHECK(paper.direct_bytes == Approx(4.5));
  CHECK(paper.ring_bytes == Approx(22.0 / 12));
  CHECK(paper.reason() ==
        "ring steps send 1.83 bytes per gradient byte off the busiest of 4 machines, direct "
        "steps 4.5");
  // 2 ranks on each of 2 machines: 2 x 2 x 2/4 = 2 against 2 x 3/4 = 1.5.
  CHECK(choose_ring_steps({0, 0, 1, 1}).steps == RingSteps::kRing);
  // Machine ids need not be dense or sorted.
  CHECK(choose_ring_steps({7, 7, 3, 3}).steps == RingSteps::kRing);
}

TEST_CASE("direct steps where the ring saves no network bytes", "[ring_steps]") {
  // One machine: nothing leaves it either way; fewer latencies win.
  const RingStepsChoice one = choose_ring_steps({0, 0, 0, 0});
  CHECK(one.steps == RingSteps::kDirect);
  CHECK(one.machines == 1);
  CHECK(one.direct_bytes == 0);
  CHECK(one.ring_bytes == 0);
  CHECK(choose_ring_steps({0}).steps == RingSteps::kDirect);
  // One rank per machine: every byte crosses a network link either way (a tie).
  const RingStepsChoice spread = choose_ring_steps({0, 1, 2, 3});
  CHECK(spread.steps == RingSteps::kDirect);
  CHECK(spread.direct_bytes == spread.ring_bytes);
  // Ranks dealt round-robin: every ring step crosses machines (3 x 2 x 11/12 = 5.5 off each),
  // more than direct steps' 4.5.
  const RingStepsChoice dealt = choose_ring_steps({0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3});
  CHECK(dealt.steps == RingSteps::kDirect);
  CHECK(dealt.ring_bytes == Approx(5.5));
  CHECK(dealt.direct_bytes == Approx(4.5));
  CHECK_THROWS_AS(choose_ring_steps({}), Error);
}
