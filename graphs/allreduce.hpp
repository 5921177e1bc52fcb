// Gradient reduction across locations, composed of ordinary graph ops (copy, sum, split,
// concat, reshape). Every function takes one blob per participant, `parts[r]` at its own
// location (a rank may hold several), all of one shape, and builds the ops under the scope
// `name`. Between locations of one rank the copies are memory copies, between ranks MPI. The ops
// run on each location's Graph::kCommThread, so that reductions overlap the backward pass.
//   ring_allreduce:  reduce-scatter then all-gather around the ring of parts; each rank sends
//                    2(N-1)/N of the data. Returns the sum at every part's location. Small
//                    buffers go by exchange_allreduce instead (see kExchangeMaxBytes), the rest
//                    by direct steps, the ring's own, or direct steps inside a machine and the
//                    ring's between machines (see RingSteps). A large chunk going around the
//                    ring travels in segments (see kRingSegmentBytes), each with its own copies
//                    and sums in the chunk's order, so segments pipeline and the sums keep their
//                    bits.
//   exchange_allreduce: every part sent whole to every other location in one step, then summed
//                    where it arrived: one message latency instead of the ring's 2(N-1), at
//                    (N-1) times the data per rank. Each chunk is summed in the ring's order,
//                    so its results are bit for bit the ring's.
//   ring_reduce_scatter, ring_all_gather: its two halves, for work on the summed chunks in
//                    between (data_parallel updates each chunk of the weights on its owner).
//   mpi_allreduce:   one native MPI_Allreduce op per rank, for comparison (one part per rank;
//                    a part on a GPU is reduced through its rank's host memory).
//   nccl_allreduce:  one NCCL allreduce op per rank between the ranks' GPUs (one GPU part per
//                    rank), for comparison.
// The parameter server's halves are the Aggregate and Distribute composites (graphs/copies.hpp).
// Sums are in a fixed order, so every run gives bit-identical results.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "purine/graph.hpp"

namespace purine {

// How data_parallel reduces gradients: the ring, a parameter server (rank 0's CPU), the
// native MPI allreduce, or NCCL's between GPUs. The names users type ("ring", "ps", "mpi",
// "nccl") are parsed in train/options.hpp.
enum class Reduction { kRing, kParameterServer, kMpi, kNccl };

// ring_allreduce reduces by exchange_allreduce when each location would receive at most this
// many bytes that way ((N-1) * the part's bytes). Measured with build/tools/bench_allreduce
// --exchange_max_bytes=0 (the ring alone, before direct steps) and =2^40 (the exchange alone) on
// the 2-core build machine (Open MPI shared memory, 2026-11-26): at 2 ranks the exchange was ahead
// from 16 KB to 1 MB (1.5-2x at 64-256 KB) and level at 1-4 KB; at 3 ranks (oversubscribed) ahead
// up to 1 MB per part. 256 KB keeps the default gradient bucket on it at 2 ranks while bounding the
// exchange's (N-1)x traffic at more ranks, which were not measured on real cores.
constexpr int64_t kExchangeMaxBytes = int64_t{256} << 10;

// The ring sends a chunk larger than this in segments of at most this size, from 4 ranks on
// (ring_segment_bytes). On the 16-core GPU host (Open MPI shared memory, 2026-11-26,
// bench_allreduce --variants, median of 7), the ring cut into 256 KB segments against the ring
// of whole chunks, at 16 / 4 / 1 MB: 8 ranks 15.6 / 4.2 / 1.1 ms against 25.5 / 4.6 / 1.3
// (MPI_Allreduce 15.2 / 3.0 / 0.76); 4 ranks 10.8 / 2.6 / 0.80 against 13.5 / 3.2 / 0.94. At 2
// ranks (one step per half, nothing to pipeline) it was 20% slower on the 2-core build machine; 3
// was not measured.
constexpr int64_t kRingSegmentBytes = int64_t{256} << 10;
constexpr int kRingSegmentMinRanks = 4;
// The segment size the ring uses over `ranks` locations (0: whole chunks).
int64_t ring_segment_bytes(int ranks);

// How the reduce-scatter and the all-gather move the ring's chunks (same chunks, same sums in
// the same order, so the same bits every way):
//   kDirect:   every rank sends chunk c straight to its owner, which sums all N in the ring's
//              order in one op, and each owner sends its sum straight to every rank: 2 message
//              latencies instead of 2(N-1), one pass over the received chunks instead of N-1.
//   kRing:     around the ring, N-1 steps each way, a sum per step.
//   kMachines: direct steps inside a machine, the ring's between machines. Chunk c's sum, in the
//              ring's order, passes through the ranks c, c+1, ..., c-1 in runs of consecutive
//              ranks on one machine: one rank of each run adds the running sum from the run
//              before and the run's chunks in one op, and sends it on to the next machine. Its
//              owner sends the sum straight to its machine's ranks and to one rank of every other
//              machine, which passes it on inside its machine. With ranks placed machine by
//              machine, the running sums leave a machine as often as the ring's, but in as many
//              steps as there are machines; on one machine these are direct steps, with one rank
//              per machine the ring's reduce-scatter. Needs RingOptions::machine_of_rank.
// kDirect is the default: bench_allreduce --ways on the 2-core build machine (Open MPI shared
// memory, ranks oversubscribed, 2026-11-26) timed it against the ring's steps at 16 KB-64 MB:
// on 4 ranks 18.3 against 33.0 ms at 16 MB and 80.7 against 307.7 at 64 MB (MPI_Allreduce 146.4),
// on 3 ranks 57.9 against 64.1 ms at 64 MB, level within the noise below 16 MB; on 2 ranks the
// two are one algorithm. Between machines, --ring-steps=auto (train/ring_steps.hpp) weighs the
// bytes each way puts on a machine's network link.
enum class RingSteps { kDirect, kRing, kMachines };

// How the ring's family moves data; the defaults are the measured choices above, tests and the
// benchmark pass others. Every choice gives the same bits.
struct RingOptions {
  int64_t exchange_max_bytes = kExchangeMaxBytes;  // 0: never the one-step exchange
  RingSteps steps = RingSteps::kDirect;
  // The segments of the running sums passed between ranks (kRing) or machines (kMachines);
  // -1: ring_segment_bytes(ranks or machines), 0: whole chunks. Direct steps take whole chunks.
  int64_t segment_bytes = -1;
  // kMachines: machine_of_rank[r] is rank r's machine, any ids (mpi_machine_of_ranks()).
  std::vector<int> machine_of_rank = {};
};

std::vector<Blob*> ring_allreduce(Graph& graph, const std::string& name,
                                  const std::vector<Blob*>& parts, const RingOptions& options = {});
std::vector<Blob*> exchange_allreduce(Graph& graph, const std::string& name,
                                      const std::vector<Blob*>& parts);

// The reduce-scatter's result: every part's elements cut into N chunks of consecutive elements
// (the first count % N one longer; empty when count < N), chunk (r + 1) % N summed on rank r.
struct RingShards {
  Shape shape;                                 // of the parts
  std::vector<Location> locations;             // of the parts, in ring order
  std::vector<int64_t> sizes;                  // elements of chunk c
  std::vector<std::vector<int64_t>> segments;  // elements of each segment of chunk c, in order
  RingSteps steps = RingSteps::kDirect;        // the all-gather's too
  std::vector<int> groups;   // of each part: kMachines its machine, kDirect 0, kRing its index
  std::vector<Blob*> owned;  // owned[r]: the sum of chunk_of(r) at locations[r], or null
  int chunk_of(int rank) const { return (rank + 1) % static_cast<int>(sizes.size()); }
};
// exchange_max_bytes plays no part here.
RingShards ring_reduce_scatter(Graph& graph, const std::string& name,
                               const std::vector<Blob*>& parts, const RingOptions& options = {});
// `owned[r]` (at locations[r], shaped like chunk chunk_of(r)) sent around the ring; returns
// the whole, shaped like the parts, at every location.
std::vector<Blob*> ring_all_gather(Graph& graph, const std::string& name, const RingShards& shards,
                                   const std::vector<Blob*>& owned);
// `whole` (shaped like the parts) cut into the shards' chunks as zero-copy views, built under
// `name` at the current placement; entry c is null where chunk c is empty.
std::vector<Blob*> flat_chunks(Graph& graph, const std::string& name, Blob* whole,
                               const RingShards& shards);
// The chunk-sized messages a ring reduction by `steps` sends between parts, reduce-scatter then
// all-gather, as (from, to) part indices (the graph's copies between them, chunk by chunk, not in
// the order it builds them), for parts on the machines `machine_of_part` (what
// --ring-steps=auto weighs; kDirect and kRing ignore them). Empty chunks are counted too.
std::vector<std::pair<int, int>> ring_messages(RingSteps steps,
                                               const std::vector<int>& machine_of_part);
std::vector<Blob*> mpi_allreduce(Graph& graph, const std::string& name,
                                 const std::vector<Blob*>& parts);
std::vector<Blob*> nccl_allreduce(Graph& graph, const std::string& name,
                                  const std::vector<Blob*>& parts);

}  // namespace purine
