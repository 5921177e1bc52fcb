// --ring-steps=auto: which steps the ring reduction takes (graphs/allreduce.hpp RingSteps),
// chosen from the machine each rank runs on. Every way sends each rank 2(N-1)/N of a gradient
// and gives the same bits; they differ in where the bytes go and in how many steps they take:
//   direct:   every rank sends its chunks straight to every other rank, so 2 m (N - m) / N of a
//             gradient leave (and reach) a machine that holds m of the N ranks, in 2 steps;
//   machines: direct steps inside a machine, the ring's between machines: with ranks placed
//             machine by machine (mpirun's default) about 2 (M - 1) / M of a gradient leaves
//             each of M machines, in about M + 2 steps (the ring's reduce-scatter with one rank
//             per machine, direct steps on one machine).
// Machine steps are chosen when they put fewer bytes on the busiest machine's network link
// (counted from the messages the graph would send, ring_messages()); direct steps otherwise:
// on one machine or with one rank per machine (a tie).
// The ring's own steps (2(N-1) of them) are never fewer bytes than machine steps.
//
//   options.machine_of_rank = mpi_machine_of_ranks();  // {0, 0, 0, 1, 1, 1, ...}
//   const RingStepsChoice c =
//       choose_ring_steps(options.machine_of_rank, replicas_per_rank(options));
//   options.ring_steps = c.steps;
#pragma once

#include <string>
#include <vector>

#include "graphs/allreduce.hpp"

namespace purine {

struct RingStepsChoice {
  RingSteps steps = RingSteps::kDirect;
  int machines = 1;
  // Bytes leaving the busiest machine per byte of gradient reduced (reduce-scatter and
  // all-gather together).
  double direct_bytes = 0, machine_bytes = 0;
  // Where some machine's ranks are not consecutive (mpirun --map-by node): machine steps' bytes
  // had the same ranks been placed machine by machine (mpirun's default); else 0.
  double in_order_bytes = 0;
  // "machine steps send 1.67 bytes per gradient byte off the busiest of 4 machines, direct
  // steps 4.5", and where the ranks are out of order "...; 1.67 with the ranks placed machine by
  // machine, as mpirun places them by default"
  std::string reason() const;
};

// machine_of_rank[r]: rank r's machine, any ids (mpi_machine_of_ranks(), or a simulated
// cluster's placement); parts_per_rank: the parts of the reduction each rank holds, one after
// another in the ring (replicas_per_rank(): a rank's GPUs or CPU locations). Throws
// purine::Error on an empty list or fewer than one part per rank.
RingStepsChoice choose_ring_steps(const std::vector<int>& machine_of_rank, int parts_per_rank = 1);

}  // namespace purine
