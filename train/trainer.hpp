// Trainer: single-process training of a registered model on an IDX data set (Fashion-MNIST by
// default). It composes the training graph from the forward-only model (data source on its own
// thread, model, softmax loss, accuracy, derived backward graph, SGD graph), initializes the
// parameters from the seed, iterates the graph (one run = one SGD step) and evaluates on the
// test split with a second graph that shares the parameter tensors. Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "dispatcher/engine.hpp"
#include "purine/mpi.hpp"

namespace purine {

class Graph;

struct TrainOptions {
  std::string model = "convnet";
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int epochs = 5;
  int64_t max_iters = 0;  // 0: no limit beyond epochs
  int batch = 64;
  double lr = 0.01;
  std::string lr_policy = "poly";  // "fixed", "step" or "poly" (see graphs/lr_schedule.hpp)
  double lr_gamma = 0.1;           // step: factor per step
  int64_t lr_step = 0;             // step: iterations per step (0: one epoch)
  double lr_power = 1.0;           // poly: exponent
  double momentum = 0.9;
  double weight_decay = 5e-4;
  int threads = 2;   // compute threads (OpenMP, BLAS, oneDNN), at most 1024
  int classes = 10;  // the model's outputs; a label outside [0, classes) is an error
  // Input standardization, (pixel / 255 - input_mean) / input_std: Fashion-MNIST's training
  // split has mean 0.2860 and standard deviation 0.3530.
  double input_mean = 0.2860;
  double input_std = 0.3530;
  // Data parallelism over MPI ranks: `batch` images per rank; gradients reduced by "ring", "ps"
  // (parameter server on rank 0) or "mpi" (native allreduce).
  int ranks = mpi_world_size();
  int rank = mpi_world_rank();
  // Replicas per rank, each at its own CPU location (rank<R>:cpu0, :cpu1, ...) with its own
  // threads, `batch / locations` images each; the rank's `threads` are shared among them.
  int locations = 1;
  std::string reduce = "ring";
  // Gradients smaller than this are fused into buckets of up to this size, each reduced once
  // (graphs/buckets.hpp); 0 reduces every gradient alone.
  int64_t bucket_kb = 256;
  std::chrono::milliseconds stall_timeout{60000};
  uint64_t seed = 1;
  dispatch::Mode mode = dispatch::Mode::kParallel;
  int test_batch = 100;
  int64_t test_samples = 0;  // 0: the whole test split
  bool evaluate = true;
  // When set, every task of the training runs is traced and written there as Chrome-trace JSON
  // (open it in ui.perfetto.dev) when training ends.
  std::string trace_path;
  // Checkpoints (purine/serialize.hpp), saved during training into `checkpoint_dir`
  // (train/checkpoint_dir.hpp) every `checkpoint_every` iterations (0: none before the end)
  // and when training ends, keeping the newest `keep`; and/or into the file `checkpoint_path`
  // when training ends. Both are written before the trace and the evaluation, so that their
  // failures lose no training; every output path is checked before training starts.
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;
  int keep = 3;
  std::string checkpoint_path;
};

// Progress and results are global: the loss is the mean over all ranks' batches, images/s
// counts every rank's images. Only rank 0 evaluates.
struct TrainProgress {
  int64_t iteration = 0;  // completed iterations, those before a resumed checkpoint included
  int64_t total_iterations = 0;
  int epoch = 0;  // 1-based
  double loss = 0;
  double images_per_sec = 0;
  double eta_seconds = 0;
};

struct TrainResult {
  int64_t iterations = 0;
  double images_per_sec = 0;  // training throughput after the first 10 iterations
  double final_loss = 0;
  double test_accuracy = 0;
  double wall_seconds = 0;
};

class Trainer {
 public:
  // Builds and validates both graphs; throws purine::Error on bad options, an unknown model or
  // unreadable data, before any training starts.
  explicit Trainer(TrainOptions options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Trains, calling `progress` after every iteration (the caller throttles its output).
  TrainResult train(const std::function<void(const TrainProgress&)>& progress = {});
  // Accuracy of the current parameters on the test split.
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
  // The training graph (forward, backward and SGD), e.g. to export it.
  const Graph& training_graph() const;
  int64_t iterations_per_epoch() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace purine
