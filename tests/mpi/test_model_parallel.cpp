// A model whose layers are split over the MPI ranks (--parallel=model, graphs/model_parallel.hpp
// through the Trainer): N ranks, one location each, follow the run of one process with the same
// layers split over N CPU locations bit for bit (the same ops in the same order; only the
// copies between locations become messages between ranks), and two identical runs are
// bit-identical. Each rank holds its pieces of the split layers.

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "fashion_mnist.hpp"
#include "layout_run.hpp"
#include "mpi_test.hpp"
#include "purine/graph.hpp"
#include "train/trainer.hpp"

using namespace purine;
using namespace purine::mpitest;

namespace {

TrainOptions split_options(int ranks, int rank, int locations) {
  TrainOptions o;
  o.model = "mlp";
  o.data_dir = purine::testing::kFashionMnistDir;
  o.max_iters = 20;
  o.batch = 32;
  o.lr = 0.02;
  o.threads = 1;  // several ranks share two cores
  o.seed = 7;
  o.ranks = ranks;
  o.rank = rank;
  o.parallel = ParallelLayout::kModel;
  o.split = {"fc1", "fc2"};
  o.locations = locations;
  o.test_samples = 200;
  o.stall_timeout = kStallTimeout;
  return o;
}

}  // namespace

TEST_CASE("layers split over the ranks follow the same split in one process bit for bit",
          "[model_parallel]") {
  if (!purine::testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  INFO("rank " << rank() << " of " << size());
  LayoutRun reference;
  if (rank() == 0) reference = train_layout(split_options(1, 0, size()));
  barrier();
  const LayoutRun first = train_layout(split_options(size(), rank(), 1));
  const LayoutRun second = train_layout(split_options(size(), rank(), 1));
  const std::vector<uint64_t> first_hashes = allgather(hash_of(first.weights));
  const std::vector<uint64_t> second_hashes = allgather(hash_of(second.weights));
  barrier();  // the last collective of the test
  CHECK(first.error == "");
  CHECK(second.error == "");
  CHECK(first.ranks_holding_weights == size());  // every rank holds pieces of fc1 and fc2
  CHECK(first_hashes == second_hashes);          // reruns bit-identical on every rank
  if (rank() == 0) {
    CHECK(reference.error == "");
    REQUIRE(reference.losses.size() == 20);
    CHECK(reference.losses.back() < reference.losses.front());
    CHECK(first.losses == reference.losses);
    CHECK(first.accuracy == reference.accuracy);
  }
}
