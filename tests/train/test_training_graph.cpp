// The training graph's composition (train/training_graph.hpp): where a layout puts replicas and
// stages, and what compose_training_graph hands the trainer.
#include <catch2/catch.hpp>
#include <vector>

#include "models/models.hpp"
#include "purine/graph.hpp"
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

TEST_CASE(
    "every model pipelines over 3 stages with micro-batches, and over 2 locations holding 2 "
    "stages each, its output at the last stage",
    "[training_graph][pipeline]") {
  // A vertex built outside every layer stays at the first stage: nin's logits, a reshape op of
  // its own, sent the last stage's output back to the first, which the micro-batches' schedule
  // turned into a circle of waits.
  struct Shape {
    int stages, virtual_stages, micro_batches;
  };
  for (const Shape shape : {Shape{3, 1, 3}, Shape{2, 2, 2}})
    for (const std::string& model : model_names()) {
      if (model.rfind("test_", 0) == 0) continue;                // the tests' own
      if (shape.virtual_stages > 1 && model == "mlp") continue;  // 3 layers, not 4 stages
      INFO(model << ": " << shape.stages << " locations of " << shape.virtual_stages << " stages");
      TrainOptions o = layout(ParallelLayout::kPipeline, 1, 1, shape.stages);
      o.virtual_stages = shape.virtual_stages;
      o.model = model;
      const bool large =
          model == "googlenet" || model == "alexnet" || model.rfind("resnet", 0) == 0;
      o.data_dir = large && model != "resnet20" ? "synthetic:3x224x224:10" : "synthetic:1x28x28:10";
      o.micro_batches = shape.micro_batches;
      o.batch = 2 * shape.micro_batches;
      o.evaluate = false;
      Graph g("train");
      REQUIRE_NOTHROW(compose_training_graph(g, o, /*every_rank=*/true));
      REQUIRE_NOTHROW(g.validate());
      // The loss of every micro-batch at the last stage, and the logits it reads made there.
      const Location last = Location::cpu(0, shape.stages - 1);
      int losses = 0;
      for (const auto& op : g.ops())
        if (op->type() == "softmax_cross_entropy") {
          ++losses;
          CHECK(op->location() == last);
          const Op* logits = op->inputs()[0]->writers().at(0);
          CHECK(logits->type() != "copy");
          CHECK(logits->location() == last);
        }
      CHECK(losses == shape.micro_batches);
    }
}
