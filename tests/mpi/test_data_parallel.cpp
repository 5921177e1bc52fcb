// Data-parallel training over the MPI ranks (graphs/data_parallel.hpp through the Trainer):
// N ranks with batch b each follow the loss trajectory of one process with batch N*b (same seed,
// same data order), for every reduction (ring, ps, mpi), with the default gradient buckets (in
// mlp and lenet the small gradients are fused, the first layer's weight is reduced alone) and
// with every gradient reduced alone, and with two replicas per rank (--locations=2), and for
// convnet_bn with its batch norm synchronized over the ranks (the default --sync-bn); every
// replica ends with the same weights, bit for bit; two identical N-rank runs are bit-identical.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "fashion_mnist.hpp"
#include "mpi_test.hpp"
#include "purine/graph.hpp"
#include "train/trainer.hpp"

using namespace purine;
using namespace purine::mpitest;

namespace {

constexpr int kBatch = 16;  // per rank
constexpr int kIters = 20;

TrainOptions options(const std::string& model, int ranks, int rank, int batch,
                     const std::string& reduce, int64_t bucket_kb = TrainOptions().bucket_kb,
                     int locations = 1) {
  TrainOptions o;
  o.model = model;
  o.data_dir = purine::testing::kFashionMnistDir;
  o.max_iters = kIters;
  o.batch = batch;
  o.lr = model == "mlp" ? 0.02 : 0.002;  // stays clear of divergence, where trajectories part
  o.threads = 1;                         // several ranks share two cores
  o.seed = 7;
  o.ranks = ranks;
  o.rank = rank;
  o.parallel = ParallelLayout::kData;
  o.reduce = parse_reduction(reduce);
  o.bucket_kb = bucket_kb;
  o.locations = locations;
  o.evaluate = false;
  o.stall_timeout = kStallTimeout;
  return o;
}

struct Run {
  std::string error;
  std::vector<double> losses;         // per iteration; meaningful on rank 0 only
  uint64_t weights_hash = 0;          // this rank's first replica's weights after training
  bool local_replicas_agree = false;  // this rank's replicas end with the same weights
};

Run train(const TrainOptions& o) {
  Run run;
  run.error = run_and_catch([&] {
    Trainer trainer(o);
    trainer.train([&](const TrainProgress& p) { run.losses.push_back(p.loss); });
    std::map<Location, std::vector<float>> weights;  // per replica
    for (const Parameter& p : trainer.training_graph().parameters()) {
      if (p.blob->location().rank != o.rank) continue;
      std::vector<float> v = values_of(p.blob->tensor());
      std::vector<float>& mine = weights[p.blob->location()];
      mine.insert(mine.end(), v.begin(), v.end());
    }
    run.weights_hash = hash_of(weights.begin()->second);
    run.local_replicas_agree = weights.size() == static_cast<size_t>(o.locations);
    for (const auto& entry : weights)
      run.local_replicas_agree &= entry.second == weights.begin()->second;
  });
  return run;
}

// One process with the global batch, run by rank 0 while the others wait; cached per model.
const Run& single_process_reference(const std::string& model) {
  static std::map<std::string, Run> cache;
  auto it = cache.find(model);
  if (it == cache.end()) {
    Run run;
    if (rank() == 0) run = train(options(model, 1, 0, kBatch * size(), "ring"));
    barrier();
    it = cache.emplace(model, std::move(run)).first;
  }
  return it->second;
}

void check_follows_reference(const std::string& model, const std::string& reduce,
                             int64_t bucket_kb = TrainOptions().bucket_kb, int locations = 1) {
  if (!purine::testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  INFO("rank " << rank() << " of " << size() << ", " << model << ", reduce=" << reduce
               << ", bucket_kb=" << bucket_kb << ", locations=" << locations);
  const Run& reference = single_process_reference(model);
  const Run first = train(options(model, size(), rank(), kBatch, reduce, bucket_kb, locations));
  const Run second = train(options(model, size(), rank(), kBatch, reduce, bucket_kb, locations));
  const std::vector<uint64_t> hashes = allgather(first.weights_hash);
  barrier();  // the last collective of the test: assertions below may end it early on one rank
  CHECK(first.error == "");
  CHECK(second.error == "");
  if (rank() == 0) {
    CHECK(reference.error == "");
    REQUIRE(reference.losses.size() == static_cast<size_t>(kIters));
    REQUIRE(first.losses.size() == static_cast<size_t>(kIters));
    double worst = 0;
    for (int i = 0; i < kIters; ++i) {
      const double a = first.losses[i], b = reference.losses[i];
      worst = std::max(worst, std::abs(a - b) / std::max(std::abs(b), 1e-12));
    }
    INFO("losses: 1 rank " << reference.losses.front() << " .. " << reference.losses.back() << ", "
                           << size() << " ranks " << first.losses.front() << " .. "
                           << first.losses.back() << "; worst relative difference " << worst);
    CHECK(worst < 1e-5);
    CHECK(first.losses.back() < first.losses.front());  // it learns
    CHECK(second.losses == first.losses);               // exactly
  }
  CHECK(first.local_replicas_agree);
  CHECK(second.weights_hash == first.weights_hash);
  for (int r = 1; r < size(); ++r) CHECK(hashes[r] == hashes[0]);  // replicas agree
}

}  // namespace

TEST_CASE("data parallel mlp with ring allreduce follows one process with the global batch",
          "[mpi][data_parallel]") {
  check_follows_reference("mlp", "ring");
}

TEST_CASE("data parallel mlp with a parameter server follows one process with the global batch",
          "[mpi][data_parallel]") {
  check_follows_reference("mlp", "ps");
}

TEST_CASE("data parallel mlp with mpi_allreduce follows one process with the global batch",
          "[mpi][data_parallel]") {
  check_follows_reference("mlp", "mpi");
}

TEST_CASE("data parallel lenet with ring allreduce follows one process with the global batch",
          "[mpi][data_parallel]") {
  check_follows_reference("lenet", "ring");
}

TEST_CASE("data parallel mlp with every gradient reduced alone follows one process",
          "[mpi][data_parallel]") {
  for (const char* reduce : {"ring", "ps", "mpi"}) check_follows_reference("mlp", reduce, 0);
}

TEST_CASE("data parallel convnet_bn with synchronized batch norm follows one process",
          "[mpi][data_parallel][sync_bn]") {
  check_follows_reference("convnet_bn", "ring");
}

TEST_CASE("data parallel mlp over two locations per rank follows one process",
          "[mpi][data_parallel][locations]") {
  for (const char* reduce : {"ring", "ps"})
    check_follows_reference("mlp", reduce, TrainOptions().bucket_kb, 2);
}

TEST_CASE("data parallel by machine steps trains bit for bit as by direct steps",
          "[mpi][data_parallel][ring_steps]") {
  if (!purine::testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  // The ranks pretend to be on machines dealt in turn (0 1 0 ...): every gradient reduced alone
  // (sharded updates: reduce-scatter and all-gather), and two replicas per rank (runs of two
  // parts on one machine) with the default buckets.
  for (const auto& [bucket_kb, locations] : {std::pair<int64_t, int>{0, 1}, {256, 2}}) {
    INFO("rank " << rank() << " of " << size() << ", bucket_kb=" << bucket_kb
                 << ", locations=" << locations);
    TrainOptions o = options("mlp", size(), rank(), kBatch, "ring", bucket_kb, locations);
    o.max_iters = 8;
    const Run direct = train(o);
    o.ring_steps = RingSteps::kMachines;
    for (int r = 0; r < size(); ++r) o.machine_of_rank.push_back(r % 2);
    const Run machines = train(o);
    const std::vector<uint64_t> hashes = allgather(machines.weights_hash);
    barrier();
    CHECK(direct.error == "");
    CHECK(machines.error == "");
    if (rank() == 0) {
      CHECK(machines.losses.size() == 8);
      CHECK(machines.losses == direct.losses);
    }
    CHECK(machines.weights_hash == direct.weights_hash);
    CHECK(machines.local_replicas_agree);
    for (int r = 1; r < size(); ++r) CHECK(hashes[r] == hashes[0]);
  }
}
