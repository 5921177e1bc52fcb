// --ring-steps=auto: which steps the ring reduction takes (graphs/allreduce.hpp RingSteps),
// chosen from the machine each rank runs on. Both ways send each rank 2(N-1)/N of a gradient
// and give the same bits; they differ in where the bytes go:
//   direct: every rank sends its chunks straight to every other rank, so 2 m (N - m) / N of a
//           gradient leave (and reach) a machine that holds m of the N ranks;
//   ring:   each rank sends only to the next, so 2 (N - 1) / N leave a machine for each of its
//           ranks whose next rank is on another machine (one per machine when ranks are placed
//           machine by machine, as mpirun places them by default).
// The ring's steps are chosen when they put fewer bytes on the busiest machine's network link;
// direct steps otherwise (2 message latencies instead of 2(N-1)): on one machine, with one rank
// per machine, or with ranks dealt round-robin over machines.
//
//   const RingStepsChoice c = choose_ring_steps(mpi_machine_of_ranks());  // {0,0,0,1,1,1,...}
//   options.ring_steps = c.steps;
#pragma once

#include <string>
#include <vector>

#include "graphs/allreduce.hpp"

namespace purine {

struct RingStepsChoice {
  RingSteps steps = RingSteps::kDirect;
  int machines = 1;
  // Bytes leaving the busiest machine per byte of gradient reduced, each way.
  double direct_bytes = 0, ring_bytes = 0;
  // "ring steps send 1.83 bytes per gradient byte off the busiest of 4 machines, direct steps 4.5"
  std::string reason() const;
};

// machine_of_rank[r]: rank r's machine, any ids (mpi_machine_of_ranks(), or a simulated
// cluster's placement). Throws purine::Error on an empty list.
RingStepsChoice choose_ring_steps(const std::vector<int>& machine_of_rank);

}  // namespace purine
