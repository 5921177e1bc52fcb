// Trainer: training of a registered model (models/) on an IDX data set (Fashion-MNIST by
// default), on one location or data parallel over MPI ranks and locations (train/options.hpp).
// It composes the training graph from the forward-only model (data source on its own thread,
// serving the next batch while the model trains on the current one, TrainOptions::prefetch;
// model, softmax loss, derived backward graph, data-parallel reduction, SGD graph),
// initializes the parameters from the seed, iterates the graph (one run = one SGD step), keeps
// the checkpoints the options ask for, and evaluates on the test split with a second graph that
// shares the parameter tensors. The Trainer owns both graphs and their runnables. Not
// thread-safe, except request_stop(), which any thread or a signal handler may call.
//
// Usage (what `purine train --model=mlp --max-iters=100` does):
//   TrainOptions options;  // the defaults of `purine train`
//   options.model = "mlp";
//   options.max_iters = 100;
//   Trainer trainer(options);  // both graphs built and validated; throws on bad options or data
//   TrainResult result = trainer.train([](const TrainProgress& p) { print(p.iteration, p.loss); });
//   result.test_accuracy;      // on the test split, after the last iteration
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dispatcher/observer.hpp"
#include "purine/compile.hpp"
#include "purine/serialize.hpp"
#include "train/options.hpp"
#include "train/pipeline_meter.hpp"

namespace purine {

class Graph;

// Progress and results are global: the loss is the mean over all ranks' batches, images/s
// counts every image of an iteration. Rank 0 evaluates (a pipeline over ranks evaluates on
// every rank, as it trains) and reports the accuracy.
struct TrainProgress {
  int64_t iteration = 0;  // completed iterations, those before a resumed checkpoint included
  int64_t total_iterations = 0;
  int epoch = 0;  // 1-based
  double loss = 0;
  double learning_rate = 0;  // the rate this iteration trained with
  double images_per_sec = 0;
  double eta_seconds = 0;
  // Set in the report that follows an evaluation during training (TrainOptions::test_every):
  // the test accuracy after `iteration` iterations, on the ranks that evaluate.
  std::optional<double> test_accuracy;
};

struct TrainResult {
  int64_t iterations = 0;
  double images_per_sec = 0;  // training throughput after the first 10 iterations
  double final_loss = 0;
  double test_accuracy = 0;
  // The evaluations during training (TrainOptions::test_every), (iteration, test accuracy), in
  // order; the one when training ends is test_accuracy.
  std::vector<std::pair<int64_t, double>> evaluations;
  double wall_seconds = 0;
  // A pipeline's stages over the timed iterations, on rank 0: their work and span, whose
  // bubble() goes next to bubble_theory(). With --parallel=pipeline every rank's stage; with
  // hybrid over pipelines (--stages), rank 0's replica's.
  std::optional<PipelineTimes> pipeline;
  // How often training read its blobs on the host to name a non-finite one: 0 while the loss and
  // the weights stay finite (each iteration then reads one float per replica and location).
  int64_t blame_scans = 0;
  // Completed iterations, those before a resumed checkpoint included: the iteration the
  // checkpoints written at the end record.
  int64_t iteration = 0;
  // The checkpoint files written when training ended (or stopped): the checkpoint directory's
  // newest, then the checkpoint file; empty when the options ask for neither.
  std::vector<std::string> checkpoints;
  // True when request_stop() ended training before its total. Such a run saves its checkpoints
  // as a finished one does, but skips the evaluation (test_accuracy stays 0).
  bool stopped = false;
  int stop_signal = 0;  // the signal request_stop() was given (0: none)
  // TrainOptions::cuda_graph: Runnable::device_graphs_state() of the training runs.
  std::string device_graphs;
  int64_t replayed_iterations = 0;  // iterations launched as one recorded graph
};

// A stage of a pipeline (TrainOptions::stages), as the trainer cuts the model
// (graphs/pipeline.hpp): its layers, in order, and its share of the model's estimated work.
struct PipelineStage {
  std::vector<std::string> layers;
  double cost_share = 0;
  bool traced = false;  // shares of traced times (TrainOptions::stage_seconds), not estimates
  int location = 0;     // its index among the pipeline's locations (several: interleaved)
};
// "stages by estimated work: 0: conv1..inception_3b::pool (50%), 1: ..." and a newline, as
// purine train and purine simulate print the cut ("..., stage j at location j mod 2: ..." for
// interleaved stages); empty without stages.
std::string stages_line(const std::vector<PipelineStage>& stages);
// "3 stages", or "6 stages interleaved over 3 locations" (TrainOptions::virtual_stages).
std::string pipeline_shape(const TrainOptions& o);

// The training graph a Trainer with `options` trains, with every rank's part (SPMD: each rank
// builds the same global graph; a Trainer adds the monitors of its own rank only), built without
// memory: nothing is allocated, initialized or compiled. For performance models of a layout over
// any number of ranks in one process (`purine simulate`, train/simulation.hpp): set
// options.ranks (options.rank stays 0). With `observed`, also the blobs the Trainer reads after
// a run (RunOptions::observed: losses, accuracies, monitors), of every rank; with `stages`, a
// pipeline's cut (Trainer::pipeline_stages()). Throws purine::Error as the Trainer does for bad
// options or data.
std::unique_ptr<Graph> build_training_graph(const TrainOptions& options,
                                            std::set<const Blob*>* observed = nullptr,
                                            std::vector<PipelineStage>* stages = nullptr);

class Trainer {
 public:
  // Validates the options (validate_options), checks the output paths and builds and validates
  // both graphs; throws purine::Error on bad options, an unknown model or unreadable data,
  // before any training starts.
  explicit Trainer(TrainOptions options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Trains, calling `progress` after every iteration (the caller throttles its output), and once
  // more after each evaluation during training, with test_accuracy set. A run
  // that starts from iteration 0 (no checkpoint loaded) refuses a `checkpoint_dir` that already
  // holds checkpoints, before its first iteration: it would overwrite and prune another run's.
  TrainResult train(const std::function<void(const TrainProgress&)>& progress = {});
  // Asks train() to stop: it finishes the iteration in progress (or, when asked before train(),
  // its first), calls `progress`, saves the checkpoints the options ask for as at the end of
  // training, skips the evaluation and returns with TrainResult::stopped (and `signal` as
  // TrainResult::stop_signal). Async-signal-safe (one store to a lock-free atomic): call it from
  // any thread or from a SIGINT/SIGTERM handler, as `purine train` does. With several ranks a
  // request on any rank stops every rank after the same iteration (the checkpoint is
  // collective): each iteration then ends with one small collective of the ranks' requests; with
  // one rank it reads the flag, no more. A request stays until the Trainer is destroyed.
  //   Trainer trainer(options);  // e.g. stop early once the loss is low enough:
  //   TrainResult r = trainer.train([&](const TrainProgress& p) {
  //     if (p.loss < 0.3) trainer.request_stop();
  //   });  // r.stopped; r.checkpoints hold the training so far
  void request_stop(int signal = 0);
  // Accuracy of the current parameters on the test split (on rank 0; 0 on the other ranks of a
  // pipeline, which take part).
  double evaluate();
  // Parameters, optimizer state, the random generators and the iteration count to or from a
  // checkpoint file (purine/serialize.hpp). The file does not depend on the parallel layout: a
  // run on any number of ranks and locations, with any reduction and buckets, resumes it. With
  // several ranks both are collective (every rank calls; rank 0 writes or reads the one file).
  // After load_checkpoint (before train()), training goes on where the checkpoint stopped: the
  // next batch of the same data order, the learning rate of the next iteration, up to the same
  // total. The generators are restored when the layout is the one that saved the file, and
  // otherwise reseeded from the seed and the iteration (the same for every run that resumes it
  // in that layout).
  void save_checkpoint(const std::string& path) const;
  void load_checkpoint(const std::string& path);
  // Loads the newest complete checkpoint in `checkpoint_dir` (chosen on rank 0) and returns its
  // path; throws purine::Error when there is none.
  std::string resume_newest();
  // Continues from the checkpoint the options name: `resume_from`, or with `resume` the newest
  // in `checkpoint_dir` (resume_newest) or else `checkpoint_path`. Returns the path loaded, or
  // "" when the options name none. Collective like load_checkpoint.
  std::string resume();
  // The training graph (forward, backward and SGD), e.g. to export it.
  const Graph& training_graph() const;
  // Where the training graph keeps every parameter and state, by single-device name (what its
  // checkpoints hold, whatever the layout).
  const CheckpointMap& checkpoint_map() const;
  // The memory the training graph's compile allocated on this rank, per location, and which
  // blobs share it (TrainOptions::reuse_memory).
  const MemoryPlan& memory() const;
  int64_t iterations_per_epoch() const;
  // The stages of each replica's pipeline; empty without one.
  const std::vector<PipelineStage>& pipeline_stages() const;
  // Sees every task of the training runs (e.g. to measure a pipeline's bubble); must outlive
  // the trainer's runs.
  void add_observer(dispatch::Observer* observer);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace purine
