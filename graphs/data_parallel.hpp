// Data parallelism as graph composition: one call turns the single-device training graph into a
// data-parallel one over a list of locations, one replica each: one per rank, or several in one
// process (Location::cpu(r, 0), Location::cpu(r, 1), ..., each with its own threads). Every
// replica is the same single-device graph built at its own location under the scope
// "replica<r>"; its gradients (scaled by 1/N, so their sum is the average) are reduced by
// ordinary graph ops, chosen by `reduction`:
//   kRing:            ring allreduce (list the locations of one rank next to each other: their
//                     hops are memory copies); every replica then runs the same SGD update;
//   kParameterServer: gradients aggregated at `server`, updated there, new weights distributed
//                     (the Purine paper's scheme); a server at none of the replicas' locations
//                     (rank 0's CPU with GPU replicas, as in the paper) keeps master weights;
//   kMpi:             a native MPI_Allreduce op per gradient, for comparison; one location per
//                     rank only (a GPU replica's gradients are reduced through host memory).
//   kNccl:            an NCCL allreduce op per gradient between GPUs, for comparison; one GPU
//                     location per rank only.
// Each reduction depends only on its own gradients, so the dispatcher starts it as soon as they
// exist: communication overlaps the rest of the backward pass. Small gradients are fused into
// buckets of up to `bucket_bytes` (graphs/internal/buckets.hpp), neighbours in backward order, each
// bucket reduced once; a gradient of at least `bucket_bytes` is reduced alone (with kRing, each
// rank then updates only the chunk it summed).
//
// Checkpoints do not depend on this layout: `checkpoint` maps every parameter and state of the
// graph to its single-device tensor (the name without "replica<r>::", the whole shape). Weights
// and replica states are saved from replica 0 and loaded into every replica; momentum histories
// are saved from the one updater that holds them (replica 0, the parameter server, or, with the
// sharded ring update, each location's chunk at its offset) and loaded into every holder.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "graphs/allreduce.hpp"
#include "graphs/sgd.hpp"
#include "purine/graph.hpp"
#include "purine/serialize.hpp"

namespace purine {

// What one replica's forward graph exposes: its scalar loss (a mean over its batch) and
// accuracy. Parameters are those it registers on the graph while being built.
struct ReplicaOutputs {
  Blob* loss = nullptr;
  Blob* accuracy = nullptr;
};
// Builds replica `replica` of `replicas` at the graph's current location and scope.
using ReplicaBuilder = std::function<ReplicaOutputs(Graph& graph, int replica, int replicas)>;

struct DataParallelOptions {
  Reduction reduction = Reduction::kRing;
  // kParameterServer: a replica's location, or a location of its own (master weights there).
  Location server = Location::cpu(0);
  SgdOptions sgd;
  int64_t bucket_bytes = 256 << 10;  // 0: every gradient reduced alone
  // kRing: how the ring moves data (graphs/allreduce.hpp). The sums, so the training, are bit
  // for bit the same whatever the choice.
  RingOptions ring;
  // > 0: gradients clipped by their global norm before the updates, as PyTorch's
  // clip_grad_norm_: scaled by min(1, clip_norm / (norm + 1e-6)), the norm of the reduced
  // (averaged) gradients of all parameters together. Every update then waits for every
  // reduction.
  double clip_norm = 0;
  // With more than one replica, layers that compute statistics of their batch (batch norm, in
  // training) compute them over every replica's batch together, so that N replicas at batch b
  // follow one replica at batch N*b (PyTorch's SyncBatchNorm): their per-channel sums, forward
  // and backward, are reduced by a ring allreduce inside the graph (Graph::ReplicaSums), in a
  // fixed order. False: each replica normalizes by the statistics of its own batch.
  bool sync_batch_norm = true;
};

struct DataParallelGraph {
  std::vector<Location> locations;
  std::vector<ReplicaOutputs> replicas;
  std::vector<std::vector<Parameter>> parameters;  // per replica, in registration order
  // kParameterServer at a location of its own: its master weights, in the same order.
  std::vector<Parameter> server_parameters;
  Blob* loss = nullptr;      // replica average, at locations[0]
  Blob* accuracy = nullptr;  // replica average, at locations[0]
  SgdGraph sgd;
  CheckpointMap checkpoint;  // every parameter and state, by single-device name (see above)
};

// Throws purine::Error on an empty or repeated location list, replicas that disagree on their
// parameters, kMpi or kNccl with two locations on a
// rank, or kNccl with a replica on a CPU.
DataParallelGraph build_data_parallel(Graph& graph, const std::vector<Location>& locations,
                                      const ReplicaBuilder& build,
                                      const DataParallelOptions& options);

}  // namespace purine
