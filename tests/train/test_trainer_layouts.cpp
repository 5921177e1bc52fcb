// End to end: a model cut into a pipeline, or with layers split over locations, follows the
// one-location trajectory of the same batch; bad layouts are refused naming the layer.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "fashion_mnist.hpp"
#include "graphs/layers.hpp"
#include "graphs/pipeline.hpp"
#include "models/models.hpp"
#include "purine/dsl.hpp"
#include "purine/graph.hpp"
#include "purine/serialize.hpp"
#include "train/trainer.hpp"

using namespace purine;
using testing::have_fashion_mnist;
using testing::kFashionMnistDir;

namespace {
struct LayoutRun {
  std::vector<double> losses;
  std::map<std::string, std::vector<float>> weights;  // and histories, by single-device name
  std::set<Location> weight_locations;
  double accuracy = 0;
};

// The weights of a run by single-device name: a split layer's pieces put together.
std::map<std::string, std::vector<float>> single_device_weights(const Trainer& trainer) {
  std::map<std::string, std::vector<float>> weights;
  for (const StoredTensor& t : trainer.checkpoint_map()) weights[t.name] = stored_values(t);
  return weights;
}

// 20 iterations of `model` in the layout `lay_out` sets.
LayoutRun train_layout(const std::string& model,
                       const std::function<void(TrainOptions&)>& lay_out) {
  TrainOptions o;
  o.model = model;
  o.data_dir = kFashionMnistDir;
  o.threads = 2;
  o.seed = 5;
  o.mode = dispatch::Mode::kParallel;
  o.max_iters = 20;
  o.batch = 32;
  o.lr = model == "mlp" ? 0.05 : 0.002;
  o.test_samples = 200;
  o.test_batch = 100;
  lay_out(o);
  Trainer trainer(o);
  LayoutRun run;
  run.accuracy =
      trainer.train([&](const TrainProgress& p) { run.losses.push_back(p.loss); }).test_accuracy;
  run.weights = single_device_weights(trainer);
  for (const Parameter& p : trainer.training_graph().parameters())
    run.weight_locations.insert(p.blob->location());
  return run;
}

LayoutRun train_pipeline(const std::string& model, ParallelLayout layout, int stages) {
  return train_layout(model, [&](TrainOptions& o) {
    o.parallel = layout;
    o.stages = stages;
  });
}

// Layers with parameters of a model, as the pipeline cuts it.
int parametric_layers(const std::string& model) {
  const std::vector<ModelLayer> layers = model_layers([&](Graph& g) {
    find_model(model)(g, g.add_blob("images", {1, 1, 28, 28}), ModelSpec{});
  });
  return static_cast<int>(std::count_if(layers.begin(), layers.end(),
                                        [](const ModelLayer& l) { return l.parameters > 0; }));
}
}  // namespace

TEST_CASE("a pipeline with every layer at its own location follows the one-location run",
          "[trainer][e2e][pipeline][determinism]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  for (const std::string model : {"mlp", "lenet", "convnet"}) {
    const int stages = parametric_layers(model);
    INFO(model << " over " << stages << " stages");
    REQUIRE(stages >= 3);
    const LayoutRun reference = train_pipeline(model, ParallelLayout::kNone, 1);
    const LayoutRun run = train_pipeline(model, ParallelLayout::kPipeline, stages);
    REQUIRE(reference.losses.size() == 20);
    CHECK(reference.losses.back() < reference.losses.front());
    // The same ops in the same order on each location: bit for bit.
    CHECK(run.losses == reference.losses);
    CHECK(run.weights == reference.weights);
    CHECK(run.accuracy == reference.accuracy);
    CHECK(run.weight_locations.size() == static_cast<size_t>(stages));
    CHECK(train_pipeline(model, ParallelLayout::kPipeline, stages).losses == run.losses);
  }
}

namespace {
// Two inception modules behind a small stem, without googlenet_small's dropout (whose masks
// come from its location's generator, so they differ between layouts).
Blob* two_inceptions(Graph& g, Blob* images, const ModelSpec& spec) {
  Graph::Scope scope(g, "two_inceptions");
  Blob* x = (B{images} >> g.add<ConvLayer>("conv1", ConvLayer::Options{16, 3, 1, 1}) >>
             g.add<ActivationLayer>("relu1", "relu") >>
             g.add<PoolLayer>("pool1", PoolLayer::Options{"max", 2, 2, 0}))
                .top(0);
  x = (B{x} >>
       g.add<InceptionLayer>("inception_a", InceptionLayer::Options{32, 32, 64, 8, 16, 16}) >>
       g.add<InceptionLayer>("inception_b", InceptionLayer::Options{64, 64, 96, 16, 32, 32}) >>
       g.add<PoolLayer>("pool2", PoolLayer::Options{"avg", 14, 1, 0}))
          .top(0);
  return (B{x} >> g.add<InnerProductLayer>("fc", InnerProductLayer::Options{spec.classes})).top(0);
}
PURINE_REGISTER_MODEL("test_two_inceptions", two_inceptions);
}  // namespace

TEST_CASE("a pipeline cut between an inception module's branches follows the one-location run",
          "[trainer][e2e][pipeline][determinism]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  auto lay_out = [](int stages, StageCut cut) {
    return [stages, cut](TrainOptions& o) {
      o.parallel = stages > 1 ? ParallelLayout::kPipeline : ParallelLayout::kNone;
      o.stages = stages;
      o.stage_cut = cut;
      o.max_iters = 8;
    };
  };
  // The first layer of stage 1 for each way of cutting.
  auto second_stage = [&](StageCut cut) {
    TrainOptions o;
    o.model = "test_two_inceptions";
    o.batch = 32;
    o.data_dir = "synthetic:1x28x28:10";
    lay_out(3, cut)(o);
    const std::vector<PipelineStage> stages = Trainer(o).pipeline_stages();
    REQUIRE(stages.size() == 3);
    return stages[1].layers.front();
  };
  // The second module does 70% of the work: whole layers (the stem, two modules, fc) leave it
  // alone in a stage; parts cut inside it.
  CHECK(second_stage(StageCut::kLayers) == "inception_b");
  CHECK(second_stage(StageCut::kParts).rfind("inception_b::", 0) == 0);

  const LayoutRun reference = train_layout("test_two_inceptions", lay_out(1, StageCut::kParts));
  REQUIRE(reference.losses.size() == 8);
  CHECK(reference.losses.back() < reference.losses.front());
  // Cut between whole layers, the gradients add up as at one location: bit for bit.
  const LayoutRun layers = train_layout("test_two_inceptions", lay_out(3, StageCut::kLayers));
  CHECK(layers.losses == reference.losses);
  CHECK(layers.weights == reference.weights);
  // Cut between parts, the gradient of the module's input adds the readers beyond the cut
  // first, at their stage: equal within rounding.
  const LayoutRun parts = train_layout("test_two_inceptions", lay_out(3, StageCut::kParts));
  for (size_t i = 0; i < parts.losses.size(); ++i)
    CHECK(parts.losses[i] == Approx(reference.losses[i]).epsilon(1e-5));
  REQUIRE(parts.weights.size() == reference.weights.size());
  // Over 8 iterations a rounding apart can turn a ReLU near zero the other way, which moves a
  // weight's gradient (and its momentum) by more than rounding: on an AVX-512 machine by up to
  // 3e-4 of a blob's largest value, 1e-4 in the norm, against 3e-7 with oneDNN held to AVX2. A
  // gradient lost or counted twice at the cut moves the stage's blobs by their own size.
  for (const auto& [name, values] : reference.weights) {
    INFO(name);
    const std::vector<float>& other = parts.weights.at(name);
    REQUIRE(other.size() == values.size());
    double off = 0, norm = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      off += (double{values[i]} - other[i]) * (double{values[i]} - other[i]);
      norm += double{values[i]} * values[i];
    }
    CHECK(std::sqrt(off) <= 1e-3 * std::sqrt(norm));
  }
  CHECK(parts.weight_locations.size() == 3);
}

TEST_CASE("a pipeline's cut is the training batch's, in the test graph too",
          "[trainer][pipeline]") {
  // At 4 images per micro-batch fc1's update outweighs the convolutions, at the test graph's
  // 100 images not: a cut costed at each graph's own batch put the test graph's bn2 at another
  // stage than the training graph's, whose weights it shares (a construction error on one rank
  // that left the other ranks of a hybrid run waiting).
  TrainOptions o;
  o.model = "convnet_bn";
  o.data_dir = "synthetic:1x28x28:10";
  o.parallel = ParallelLayout::kPipeline;
  o.stages = 2;
  o.micro_batches = 4;
  o.batch = 16;
  o.test_batch = 100;
  o.max_iters = 1;
  o.threads = 1;
  Trainer trainer(o);
  const std::vector<PipelineStage>& stages = trainer.pipeline_stages();
  REQUIRE(stages.size() == 2);
  CHECK(stages[1].layers.front() == "fc1");
  CHECK(stages[0].cost_share + stages[1].cost_share == Approx(1));
  CHECK(trainer.train().test_accuracy >= 0);
}

TEST_CASE("bad pipeline layouts are refused, naming the layers", "[trainer][pipeline]") {
  TrainOptions o;
  o.model = "mlp";
  o.data_dir = kFashionMnistDir;
  o.parallel = ParallelLayout::kPipeline;
  o.stages = 4;
  if (have_fashion_mnist()) {
    REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("pipeline of model 'mlp': 4 stages") &&
                                        Catch::Contains("3 layers with parameters") &&
                                        Catch::Contains("mlp::fc1, mlp::fc2, mlp::fc3") &&
                                        Catch::Contains("use at most 3"));
  }
  o.stages = 0;
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("--stages must be at least 1, got 0"));
  o.stages = 2;
  o.locations = 2;
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("drop --locations=2"));
  o.locations = 1;
  o.devices = {0};
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("--stages=2 on GPUs needs as many --devices"));
  o.devices = {};
  o.parallel = ParallelLayout::kData;
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("--stages=2 needs --parallel=pipeline"));
}

namespace {
// The largest relative difference between two runs' losses.
double loss_difference(const LayoutRun& got, const LayoutRun& expected) {
  double worst = 0;
  REQUIRE(got.losses.size() == expected.losses.size());
  for (size_t i = 0; i < got.losses.size(); ++i)
    worst = std::max(worst,
                     std::fabs(got.losses[i] - expected.losses[i]) / std::fabs(expected.losses[i]));
  return worst;
}

// The largest difference between two runs' weights and histories, relative to the largest
// magnitude of each tensor.
double weight_difference(const LayoutRun& got, const LayoutRun& expected) {
  double worst = 0;
  REQUIRE(got.weights.size() == expected.weights.size());
  for (const auto& [name, values] : expected.weights) {
    const std::vector<float>& other = got.weights.at(name);
    double diff = 0, scale = 1e-30;
    for (size_t i = 0; i < values.size(); ++i) {
      diff = std::max(diff, std::fabs(double(other[i]) - values[i]));
      scale = std::max(scale, std::fabs(double(values[i])));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}
}  // namespace

TEST_CASE("a model with split layers follows the one-location run",
          "[trainer][e2e][model_parallel][determinism]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  // Partial results summed over locations add in another order than one location's
  // reductions: close, not bit for bit; reruns are bit for bit. Splitting a convolution
  // changes the rounding of its output, and on Fashion-MNIST's blank borders max pooling then
  // chooses among equal values by rounding, sending some gradients elsewhere: the weights of
  // such a run drift apart (~1e-3 after 20 iterations) and its losses by ~1e-5.
  struct Case {
    std::string model;
    std::vector<std::string> split;
    int locations;
    double loss_tolerance;
    double weight_tolerance;
  };
  for (const Case& c :
       {Case{"mlp", {"fc1", "fc2"}, 2, 1e-5, 1e-5}, Case{"mlp", {"fc2", "fc3"}, 3, 1e-5, 1e-5},
        Case{"lenet", {"fc1", "fc2"}, 2, 1e-5, 1e-5},
        Case{"lenet", {"conv1", "conv2"}, 2, 1e-4, 1e-2},
        // "One weird trick": convolutions by batch, fully connected by features.
        Case{"lenet", {"conv1:batch", "conv2:batch", "fc1", "fc2"}, 2, 1e-4, 1e-2}}) {
    INFO(c.model << " with " << c.split[0] << "," << c.split[1] << " split over " << c.locations
                 << " locations");
    const LayoutRun reference = train_pipeline(c.model, ParallelLayout::kNone, 1);
    auto split = [&](TrainOptions& o) {
      o.parallel = ParallelLayout::kModel;
      o.split = c.split;
      o.locations = c.locations;
    };
    const LayoutRun run = train_layout(c.model, split);
    CHECK(loss_difference(run, reference) <= c.loss_tolerance);
    CHECK(weight_difference(run, reference) <= c.weight_tolerance);
    CHECK(std::fabs(run.accuracy - reference.accuracy) <= 0.01);
    CHECK(run.weight_locations.size() == static_cast<size_t>(c.locations));
    CHECK(train_layout(c.model, split).losses == run.losses);
  }
}

TEST_CASE("bad model-parallel layouts are refused, naming the layer", "[trainer][model_parallel]") {
  TrainOptions o;
  o.model = "mlp";
  o.data_dir = kFashionMnistDir;
  o.parallel = ParallelLayout::kModel;
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("--parallel=model needs the layers to split"));
  o.parallel = ParallelLayout::kNone;
  o.split = {"fc1"};
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("--split needs --parallel=model"));
  if (!have_fashion_mnist()) return;
  o.parallel = ParallelLayout::kModel;
  o.split = {"fc1", "fc9"};
  o.locations = 2;
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("--split: model 'mlp' has no layer with "
                                                  "parameters named 'fc9'; it has mlp::fc1, "
                                                  "mlp::fc2, mlp::fc3"));
  o.split = {"fc3"};  // 10 outputs
  o.locations = 11;
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("layer 'replica0::mlp::fc3': split over 11 "
                                                  "locations, but it has 10 outputs"));
}
