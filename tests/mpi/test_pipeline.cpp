// A pipeline over the MPI ranks (--parallel=pipeline, graphs/pipeline.hpp through the Trainer):
// N ranks, one stage each, follow the loss trajectory and test accuracy of one process with the
// whole model, bit for bit (the same ops in the same order; activations and their gradients only
// cross ranks by copies), and two identical runs are bit-identical; so do interleaved stages,
// two per rank. Each rank ends holding the
// weights of its own stage only.

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

TrainOptions pipeline_options(const std::string& model, int ranks, int rank) {
  TrainOptions o;
  o.model = model;
  o.data_dir = purine::testing::kFashionMnistDir;
  o.max_iters = 20;
  o.batch = 32;
  o.lr = model == "lenet" ? 0.002 : 0.02;
  o.threads = 1;  // several ranks share two cores
  o.seed = 7;
  o.ranks = ranks;
  o.rank = rank;
  o.parallel = ranks > 1 ? ParallelLayout::kPipeline : ParallelLayout::kNone;
  o.stages = ranks;
  o.test_samples = 200;
  o.stall_timeout = kStallTimeout;
  return o;
}

}  // namespace

TEST_CASE("a pipeline with one stage per rank follows the one-process run bit for bit",
          "[pipeline]") {
  if (!purine::testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  for (const std::string model : {"mlp", "lenet"}) {
    INFO("rank " << rank() << " of " << size() << ", " << model);
    LayoutRun reference;
    if (rank() == 0) reference = train_layout(pipeline_options(model, 1, 0));
    barrier();
    const LayoutRun first = train_layout(pipeline_options(model, size(), rank()));
    const LayoutRun second = train_layout(pipeline_options(model, size(), rank()));
    const std::vector<uint64_t> first_hashes = allgather(hash_of(first.weights));
    const std::vector<uint64_t> second_hashes = allgather(hash_of(second.weights));
    barrier();  // the last collective of the test
    CHECK(first.error == "");
    CHECK(second.error == "");
    CHECK(first.ranks_holding_weights == size());  // every stage holds its own layers
    CHECK(first_hashes == second_hashes);          // reruns bit-identical on every rank
    if (rank() == 0) {
      CHECK(reference.error == "");
      REQUIRE(reference.losses.size() == 20);
      CHECK(first.losses == reference.losses);
      CHECK(first.accuracy == reference.accuracy);
      CHECK(second.losses == first.losses);
    }
  }
}

TEST_CASE("micro-batches through a pipeline over ranks follow the one-process pipeline",
          "[pipeline]") {
  if (!purine::testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  // The same stages in one process (CPU locations) and over the ranks, 4 micro-batches under
  // each schedule: the same ops in the same order on each stage, bit for bit (with the memory
  // plan's orders proven through the other ranks).
  INFO("rank " << rank() << " of " << size());
  for (PipelineSchedule schedule :
       {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B, PipelineSchedule::kZBH1}) {
    INFO("schedule " << static_cast<int>(schedule));
    auto with_micro_batches = [schedule](TrainOptions o) {
      o.parallel = ParallelLayout::kPipeline;
      o.stages = size();
      o.micro_batches = 4;
      o.schedule = schedule;
      return o;
    };
    LayoutRun reference;
    if (rank() == 0) reference = train_layout(with_micro_batches(pipeline_options("mlp", 1, 0)));
    barrier();
    const LayoutRun run = train_layout(with_micro_batches(pipeline_options("mlp", size(), rank())));
    barrier();
    CHECK(run.error == "");
    if (rank() == 0) {
      CHECK(reference.error == "");
      CHECK(reference.losses.size() == 20);  // not REQUIRE: the other ranks wait at a barrier
      CHECK(run.losses == reference.losses);
      CHECK(run.accuracy == reference.accuracy);
    }
  }
}

TEST_CASE("interleaved stages over ranks follow the one-process run bit for bit", "[pipeline]") {
  if (!purine::testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  // convnet_bn (6 layers with parameters) in 2 stages per rank, a micro-batch per rank: its
  // batch norm chains the micro-batches through both stages of every rank.
  INFO("rank " << rank() << " of " << size());
  auto interleaved = [](TrainOptions o) {
    o.batch = 8 * size();
    o.micro_batches = size();
    return o;
  };
  LayoutRun reference;  // gradient accumulation in one process
  if (rank() == 0) reference = train_layout(interleaved(pipeline_options("convnet_bn", 1, 0)));
  barrier();
  TrainOptions o = interleaved(pipeline_options("convnet_bn", size(), rank()));
  o.virtual_stages = 2;
  const LayoutRun run = train_layout(o);
  barrier();
  CHECK(run.error == "");
  CHECK(run.ranks_holding_weights == size());
  if (rank() == 0) {
    CHECK(reference.error == "");
    CHECK(reference.losses.size() == 20);  // not REQUIRE: the other ranks wait at a barrier
    CHECK(run.losses == reference.losses);
    CHECK(run.accuracy == reference.accuracy);
  }
}

TEST_CASE("a pipeline over ranks needs one stage per rank", "[pipeline]") {
  TrainOptions o = pipeline_options("mlp", size(), rank());
  o.stages = size() + 1;
  CHECK_THROWS_WITH(Trainer(o), Catch::Contains("a pipeline over " + std::to_string(size()) +
                                                " MPI ranks has one stage per rank"));
}
