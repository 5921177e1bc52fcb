// The training graph's composition (train/training_graph.hpp): where a layout puts replicas and
// stages, and what compose_training_graph hands the trainer.
#include <catch2/catch.hpp>
#include <vector>

#include "train/options.hpp"
#include "train/training_graph.hpp"

using namespace purine;

namespace {

TrainOptions layout(ParallelLayout parallel, int ranks, int locations, int stages) {
  TrainOptions o;
  o.model = "mlp";
  o.data_dir = "synthetic:1x28x28:10";
  o.parallel = parallel;
  o.ranks = ranks;
  o.rank = 0;
  o.locations = locations;
  o.stages = stages;
  return o;
}

}  // namespace

TEST_CASE("replica and layout locations follow the layout", "[training_graph]") {
  const TrainOptions data = layout(ParallelLayout::kData, 2, 2, 1);
  CHECK(replica_locations(data) == std::vector<Location>{Location::cpu(0, 0), Location::cpu(0, 1),
                                                         Location::cpu(1, 0), Location::cpu(1, 1)});
  const TrainOptions pipeline = layout(ParallelLayout::kPipeline, 1, 1, 3);
  CHECK(layout_locations(pipeline, 0) ==
        std::vector<Location>{Location::cpu(0, 0), Location::cpu(0, 1), Location::cpu(0, 2)});
  CHECK(replica_locations(pipeline) == std::vector<Location>{Location::cpu(0, 0)});
  const TrainOptions over_ranks = layout(ParallelLayout::kPipeline, 3, 1, 3);
  CHECK(layout_locations(over_ranks, 0) ==
        std::vector<Location>{Location::cpu(0, 0), Location::cpu(1, 0), Location::cpu(2, 0)});
}

TEST_CASE("compose_training_graph hands the trainer its feeds, monitors and observed blobs",
          "[training_graph]") {
  TrainOptions o = layout(ParallelLayout::kData, 1, 2, 1);
  o.batch = 8;
  validate_options(o);
  Graph g("train");
  const TrainingGraphParts parts = compose_training_graph(g, o, /*every_rank=*/false);
  REQUIRE(parts.feeds.size() == 2);  // one prefetching data op per replica
  for (const DataFeed& feed : parts.feeds) CHECK(feed.prefetched());
  CHECK(parts.epoch_data == parts.feeds[0].source);
  CHECK(parts.watch.replica_losses.size() == 2);
  REQUIRE_FALSE(parts.watch.non_finite_weights.empty());
  REQUIRE(parts.leader_loss != nullptr);
  CHECK(parts.observed.count(parts.leader_loss) == 1);
  for (const auto& [replica, loss] : parts.watch.replica_losses) CHECK(parts.observed.count(loss));
  for (const auto& [location, count] : parts.watch.non_finite_weights) {
    CHECK(location.rank == 0);
    CHECK(parts.observed.count(count) == 1);
  }
  CHECK(parts.twins.empty());  // run-ahead only at GPUs with CUDA graphs
}
