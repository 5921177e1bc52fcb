// TrainOptions::block_channels (graphs/channel_blocks.hpp): resnet20's, convnet_bn's and
// googlenet_small's activations between their convolutions, batch norms (synchronized ones too,
// data parallel), ReLUs, pooling, bias-ReLU gradients, concats and splits are held in oneDNN's
// channel blocks, and training follows the plain graph's
// losses and weights bit for bit; the evaluation after it agrees too.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "train/trainer.hpp"

using namespace purine;

namespace {

struct Outcome {
  std::vector<double> losses;
  std::vector<std::vector<float>> weights;
  int blocked = 0;  // blobs of the training graph in channel blocks
  double accuracy = 0;
};

Outcome train(TrainOptions o, bool blocks) {
  o.block_channels = blocks;
  Outcome out;
  Trainer trainer(o);
  const TrainResult result =
      trainer.train([&](const TrainProgress& p) { out.losses.push_back(p.loss); });
  for (const auto& blob : trainer.training_graph().blobs())
    out.blocked += blob->channel_block() > 0;
  for (const Parameter& p : trainer.training_graph().parameters())
    out.weights.push_back(p.blob->tensor().values());
  out.accuracy = result.test_accuracy;
  return out;
}

}  // namespace

TEST_CASE("training in channel blocks follows plain training bit for bit",
          "[trainer][channel_blocks][determinism]") {
  TrainOptions o;
  o.data_dir = "synthetic:1x28x28:10";
  o.batch = 8;
  o.max_iters = 3;
  o.lr = 0.05;
  o.threads = 2;
  o.seed = 3;
  o.test_samples = 200;
  o.test_every = 0;  // once, when training ends
  int at_least = 0;  // blobs in blocks
  SECTION("resnet20: every block's convolutions, batch norms, ReLUs and sums but the last's") {
    o.model = "resnet20";
    at_least = 40;
  }
  SECTION("convnet_bn (the default model): conv1's batch norm and pooling") {
    o.model = "convnet_bn";
    at_least = 4;
  }
  SECTION("googlenet_small: inceptions' concats and splits, pooling, bias-ReLU gradients") {
    o.model = "googlenet_small";
    at_least = 150;
  }
  SECTION("resnet20 data parallel over 2 locations: synchronized batch norm in blocks") {
    o.model = "resnet20";
    o.parallel = ParallelLayout::kData;
    o.locations = 2;
    at_least = 80;  // both replicas'
  }
  const Outcome blocked = train(o, true), plain = train(o, false);
  CHECK(blocked.blocked >= at_least);
  CHECK(plain.blocked == 0);
  REQUIRE(blocked.losses.size() == 3);
  CHECK(blocked.losses == plain.losses);
  CHECK(blocked.weights == plain.weights);
  CHECK(blocked.accuracy == plain.accuracy);
}
