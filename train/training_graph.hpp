// The training graph that Trainer composes (train/trainer.hpp), and what it keeps of it: the
// layouts' locations, each replica's network with its data feed, the monitors that see
// divergence, and the host blobs run-ahead alternates. Internal to the trainer and to
// build_training_graph; the graph's rules are in train/trainer.hpp and train/options.hpp.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "graphs/data_parallel.hpp"
#include "graphs/pipeline.hpp"
#include "operators/data_source.hpp"
#include "purine/graph.hpp"
#include "train/options.hpp"
#include "train/trainer.hpp"

namespace purine {

// The locations a model is laid out over (train/options.hpp): a pipeline's stages or a split
// model's locations, over one rank or over all of them; with kHybrid, replica r's within rank r.
std::vector<Location> layout_locations(const TrainOptions& o, int replica);

// Where each replica keeps its data, loss and the optimizer's scalars: a rank's replicas next
// to each other, so that ring hops within a rank are memory copies (or device-to-device copies
// between its GPUs). A laid-out model's are at its first location.
std::vector<Location> replica_locations(const TrainOptions& o);

// A data op and the blobs the network reads its batch from. Without prefetch the model (or
// the copy to its GPU) reads the data op's outputs, "images" and "labels", so every run starts
// by waiting for its batch. With prefetch (the training graph, TrainOptions::prefetch) the data
// op writes "images_next" and "labels_next", the network reads "images" and "labels", which no
// op writes, and after each run the swaps (Graph::add_swap) make the prefetched batch current:
// the data op of run i serves batch i+1 while the model of run i trains on batch i. A replica on
// a GPU has a second stage: the copy on the GPU's "data" stream moves the host's current batch
// (i+1) into "images@<gpu>", swapped after the run with "images_device", which the model reads
// (batch i); the data op then serves batch i+2. Before the first run (and after a resume's
// skip_to) the trainer fills the current blobs with the first batches (Impl::prime_data), so
// the model sees the batches in the same order as without prefetch, and the data cursor that
// checkpoints keep stays the iteration count (the batches trained on, not those prefetched).
struct DataFeed {
  DataSource* source = nullptr;
  Op* op = nullptr;           // the data op
  std::vector<Blob*> host;    // with prefetch: "images" and "labels" at the host
  std::vector<Blob*> device;  // with prefetch at a GPU: "images_device" and "labels_device"
  bool prefetched() const { return !host.empty(); }
};

// The single-device network of replica r of n, reading the r-th slice of every global batch,
// or, with --micro-batches=M in training, M copies of it sharing their parameters
// (Graph::share_parameters), copy m reading slice r*M+m of n*M: one run accumulates the
// micro-batches' weight gradients (autodiff sums them) before the one update. The replica's
// loss is the micro-batches' mean. Adds the data ops (each prefetching its batches in training,
// DataFeed) to `*feeds`.
ReplicaOutputs build_network(Graph& g, const TrainOptions& o, const std::string& split, int batch,
                             bool training, int replica, int replicas,
                             std::vector<DataFeed>* feeds);

// `blob` where the host reads it without waiting for a device: itself on a CPU, else a copy at
// its rank's CPU made at the end of each run on the GPU's stream (into page-locked memory).
Blob* host_readable(Graph& g, Blob* blob);

// What the trainer reads after each run to see that training converges, all host-readable:
// each replica's loss, and per location of this rank that updates weights, how many of the
// weights it swaps in are NaN or infinite (a count_non_finite op over them, operators/finite.hpp).
struct DivergenceWatch {
  std::map<size_t, Blob*> replica_losses;  // by replica index, this rank's replicas
  std::vector<std::pair<Location, Blob*>> non_finite_weights;
};

// What the trainer keeps of the training graph it composes.
struct TrainingGraphParts {
  DataParallelGraph dp;
  std::vector<PipelineStage> stages;  // each replica's pipeline
  std::vector<DataFeed> feeds;        // this rank's replicas' data ops
  DataSource* epoch_data = nullptr;   // replica 0's, on any rank (its metadata)
  DivergenceWatch watch;              // this rank's
  Blob* leader_loss = nullptr;        // dp.loss, host-readable (rank 0)
  // What the trainer reads after a run (RunOptions::observed): the losses, accuracies and
  // monitors, of this rank (of every rank with `every_rank`).
  std::set<const Blob*> observed;
  // TrainOptions::run_ahead: each host blob the trainer writes before a run or reads after it,
  // and the blob it alternates with (see add_run_ahead_twins).
  std::map<const Blob*, Blob*> twins;
};

// Composes the training graph of `o` in `train` (validated options): the replicas' networks,
// the reduction, the updates, the pipelines' schedules and the monitors this rank reads after a
// run (every rank's with `every_rank`, as a simulation of all ranks needs). Allocates nothing:
// no parameter is initialized and nothing is compiled.
TrainingGraphParts compose_training_graph(Graph& train, const TrainOptions& o, bool every_rank);

}  // namespace purine
