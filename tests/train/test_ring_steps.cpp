// --ring-steps=auto (train/ring_steps.hpp): machine steps where they put fewer bytes on the
// busiest machine's network link than direct steps, direct otherwise.
#include <catch2/catch.hpp>
#include <vector>

#include "base/error.hpp"
#include "train/ring_steps.hpp"

using namespace purine;

TEST_CASE("machine steps are chosen where ranks are placed machine by machine", "[ring_steps]") {
  // The paper's cluster: 12 GPUs, 3 per workstation. Direct steps send 3 x 2 x 9 chunks of 1/12
  // of the gradient off a workstation (4.5 bytes per gradient byte). Machine steps: the running
  // sums of the 12 chunks leave the 4 machines 44 times (3 times for the 4 chunks that start on
  // a machine's first rank, 4 for the others, whose first machine is visited again at the end),
  // 11 per machine, and each of a machine's 3 owners sends its sum to 3 machines: 20 / 12.
  const RingStepsChoice paper = choose_ring_steps({0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3});
  CHECK(paper.steps == RingSteps::kMachines);
  CHECK(paper.machines == 4);
  CHECK(paper.direct_bytes == Approx(4.5));
  CHECK(paper.machine_bytes == Approx(20.0 / 12));
  CHECK(paper.reason() ==
        "machine steps send 1.67 bytes per gradient byte off the busiest of 4 machines, direct "
        "steps 4.5");
  CHECK(paper.in_order_bytes == 0);  // placed machine by machine already
  // 2 ranks on each of 2 machines: 5 chunks of 1/4 against direct's 2 x 2 x 2.
  const RingStepsChoice two_by_two = choose_ring_steps({0, 0, 1, 1});
  CHECK(two_by_two.steps == RingSteps::kMachines);
  CHECK(two_by_two.machine_bytes == Approx(1.25));
  CHECK(two_by_two.direct_bytes == Approx(2.0));
  // Machine ids need not be dense or sorted.
  CHECK(choose_ring_steps({7, 7, 3, 3}).steps == RingSteps::kMachines);
  CHECK(choose_ring_steps({7, 7, 3, 3}).in_order_bytes == 0);
}

TEST_CASE("a rank holding several parts counts each of them", "[ring_steps]") {
  // One rank per workstation with its 3 GPUs (--devices=0,1,2): the 12 parts of the paper's
  // cluster, not 4 ranks alone on their machines (a tie, direct steps).
  const RingStepsChoice gpus = choose_ring_steps({0, 1, 2, 3}, 3);
  CHECK(gpus.steps == RingSteps::kMachines);
  CHECK(gpus.machines == 4);
  CHECK(gpus.direct_bytes == Approx(4.5));
  CHECK(gpus.machine_bytes == Approx(20.0 / 12));
  CHECK(choose_ring_steps({0, 1, 2, 3}).steps == RingSteps::kDirect);
  CHECK_THROWS_AS(choose_ring_steps({0, 1}, 0), Error);
}

TEST_CASE("direct steps where machine steps save no network bytes", "[ring_steps]") {
  // One machine: nothing leaves it either way; fewer latencies win.
  const RingStepsChoice one = choose_ring_steps({0, 0, 0, 0});
  CHECK(one.steps == RingSteps::kDirect);
  CHECK(one.machines == 1);
  CHECK(one.direct_bytes == 0);
  CHECK(one.machine_bytes == 0);
  CHECK(choose_ring_steps({0}).steps == RingSteps::kDirect);
  // One rank per machine: every byte crosses a network link either way (a tie).
  const RingStepsChoice spread = choose_ring_steps({0, 1, 2, 3});
  CHECK(spread.steps == RingSteps::kDirect);
  CHECK(spread.direct_bytes == Approx(1.5));
  CHECK(spread.machine_bytes == Approx(1.5));
  CHECK_THROWS_AS(choose_ring_steps({}), Error);
}

TEST_CASE("ranks dealt round-robin take machine steps by the bytes", "[ring_steps]") {
  // No two neighbours share a machine, so the reduce-scatter is the ring's (3 ranks x 11 chunks
  // off each machine), but each sum crosses to another machine once per machine, not per rank
  // (3 owners x 3): 42 / 12 against direct steps' 4.5.
  const RingStepsChoice dealt = choose_ring_steps({0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3});
  CHECK(dealt.steps == RingSteps::kMachines);
  CHECK(dealt.machine_bytes == Approx(3.5));
  CHECK(dealt.direct_bytes == Approx(4.5));
  // Placed machine by machine they would send the paper placement's 20 / 12, and the reason
  // says so.
  CHECK(dealt.in_order_bytes == Approx(20.0 / 12));
  CHECK(dealt.reason() ==
        "machine steps send 3.5 bytes per gradient byte off the busiest of 4 machines, direct "
        "steps 4.5; 1.67 with the ranks placed machine by machine, as mpirun places them by "
        "default");
}
