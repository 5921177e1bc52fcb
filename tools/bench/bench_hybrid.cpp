// "One weird trick" hybrid against pure data parallelism, on a model whose fully connected
// layers hold most of its weights (an AlexNet-like head on 28x28 images, registered here as
// "fc_head": two 5x5 convolutions of 32 and 64 channels, then 3136-2048-2048-10 fully
// connected, 10.7 M parameters, 98% of them in the fully connected layers). Run on N ranks:
//   data:   --parallel=data, batch/N images per rank, gradients by ring allreduce (the whole
//           10.7 M gradient crosses the ranks every iteration);
//   hybrid: --parallel=model with conv1, conv2 split by batch over the ranks (their weights
//           travel) and fc1, fc2 split by outputs and inputs (their weights stay, their inputs
//           travel), fc3 at rank 0; the same global batch.
// Per layout: the bytes every rank sent to the others per iteration, counted as they were sent
// (point-to-point messages; both layouts use only those), summed over the ranks, and images/s;
// then the ratios.
//   mpirun -np 2 build/tools/bench_hybrid [--batch=128] [--iters=30] [--threads=1]
#include <gflags/gflags.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>

#include "graphs/layers.hpp"
#include "models/models.hpp"
#include "operators/communicator.hpp"
#include "purine/dsl.hpp"
#include "purine/mpi.hpp"
#include "train/trainer.hpp"

DEFINE_string(data, "/usr/share/datasets/fashion-mnist", "IDX data directory");
DEFINE_int32(batch, 128, "global batch (divisible by the number of ranks)");
DEFINE_int32(iters, 30, "iterations per layout; the first 5 are not measured");
DEFINE_int32(threads, 1, "compute threads per rank");

namespace {

using namespace purine;

Blob* fc_head(Graph& g, Blob* images, const ModelSpec& spec) {
  Graph::Scope scope(g, "fc_head");
  auto conv = [&](const char* name, int64_t outputs) -> Composite& {
    return g.add<ConvLayer>(name, ConvLayer::Options{outputs, 5, 1, 2});
  };
  auto fc = [&](const char* name, int64_t outputs) -> Composite& {
    return g.add<InnerProductLayer>(name, InnerProductLayer::Options{outputs});
  };
  auto relu = [&](const char* name) -> Composite& { return g.add<ActivationLayer>(name, "relu"); };
  auto pool = [&](const char* name) -> Composite& {
    return g.add<PoolLayer>(name, PoolLayer::Options{"max", 2});
  };
  return (B{images} >> conv("conv1", 32) >> relu("relu1") >> pool("pool1") >> conv("conv2", 64) >>
          relu("relu2") >> pool("pool2") >> fc("fc1", 2048) >> relu("relu3") >> fc("fc2", 2048) >>
          relu("relu4") >> fc("fc3", spec.classes))
      .top(0);
}
PURINE_REGISTER_MODEL("fc_head", fc_head);

constexpr int kWarmup = 5;

struct Measured {
  double bytes_per_iteration = 0;  // sent by all ranks together
  double images_per_sec = 0;
};

Measured measure(bool hybrid, int ranks, int rank) {
  TrainOptions o;
  o.model = "fc_head";
  o.data_dir = FLAGS_data;
  o.max_iters = FLAGS_iters;
  o.threads = FLAGS_threads;
  o.evaluate = false;
  o.lr = 0.001;
  o.ranks = ranks;
  o.rank = rank;
  if (hybrid) {
    o.parallel = ParallelLayout::kModel;
    o.split = {"conv1:batch", "conv2:batch", "fc1:outputs", "fc2:inputs"};
    o.batch = FLAGS_batch;
  } else {
    o.parallel = ParallelLayout::kData;
    o.batch = FLAGS_batch / ranks;
  }
  Trainer trainer(o);
  int64_t bytes_at_warmup = 0;
  std::chrono::steady_clock::time_point start;
  trainer.train([&](const TrainProgress& p) {
    if (p.iteration != kWarmup) return;
    bytes_at_warmup = mpi_bytes_sent();
    start = std::chrono::steady_clock::now();
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int measured = FLAGS_iters - kWarmup;
  double mine = static_cast<double>(mpi_bytes_sent() - bytes_at_warmup), all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return {all / measured, measured * static_cast<double>(FLAGS_batch) / seconds};
}

}  // namespace

int main(int argc, char** argv) {
  MpiContext mpi(&argc, &argv);
  gflags::SetUsageMessage("one-weird-trick hybrid against data parallelism: bytes and img/s");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  const bool leader = mpi.rank() == 0;
  if (mpi.size() < 2 || FLAGS_iters <= kWarmup || FLAGS_batch % mpi.size() != 0) {
    if (leader)
      std::fprintf(stderr,
                   "error: run on 2 or more ranks (mpirun -np 2), with --iters above %d "
                   "and --batch divisible by the ranks\n",
                   kWarmup);
    return 1;
  }
  try {
    const Measured data = measure(false, mpi.size(), mpi.rank());
    const Measured hybrid = measure(true, mpi.size(), mpi.rank());
    if (leader) {
      std::printf(
          "fc_head on %d ranks, global batch %d, %d threads per rank, %d iterations "
          "(first %d not measured)\n",
          mpi.size(), FLAGS_batch, FLAGS_threads, FLAGS_iters, kWarmup);
      std::printf("%-8s %16s %10s\n", "layout", "MB/iteration", "img/s");
      std::printf("%-8s %16.2f %10.0f\n", "data", data.bytes_per_iteration / 1e6,
                  data.images_per_sec);
      std::printf("%-8s %16.2f %10.0f\n", "hybrid", hybrid.bytes_per_iteration / 1e6,
                  hybrid.images_per_sec);
      std::printf("hybrid/data: bytes %.3f, img/s %.2f\n",
                  hybrid.bytes_per_iteration / data.bytes_per_iteration,
                  hybrid.images_per_sec / data.images_per_sec);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error (rank %d): %s\n", mpi.rank(), e.what());
    mpi.abort(1);
  }
  return 0;
}
