// Inference with trained weights (train/predictor.hpp): any batch size, weights loaded by name
// from a checkpoint of any layout or from an exported weights file, the test split evaluated.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "fashion_mnist.hpp"
#include "purine/runnable.hpp"
#include "purine/serialize.hpp"
#include "temp_dir.hpp"
#include "train/predictor.hpp"
#include "train/trainer.hpp"

using namespace purine;
using testing::have_fashion_mnist;
using testing::kFashionMnistDir;

namespace {

// Trains mlp in a data-parallel layout of two locations (its checkpoint holds the weights by
// single-device name and SGD's histories) and returns its test accuracy on 1000 images.
double train_mlp(const std::string& checkpoint) {
  TrainOptions o;
  o.model = "mlp";
  o.data_dir = kFashionMnistDir;
  o.max_iters = 100;
  o.batch = 64;
  o.lr = 0.05;
  o.parallel = ParallelLayout::kData;
  o.locations = 2;
  o.test_samples = 1000;
  o.test_batch = 100;
  o.checkpoint_path = checkpoint;
  return Trainer(o).train().test_accuracy;
}

PredictorOptions mlp_predictor(const std::string& weights, int64_t batch) {
  PredictorOptions o;
  o.model = "mlp";
  o.weights = weights;
  o.images = {batch, 1, 28, 28};
  return o;
}

}  // namespace

TEST_CASE("top_k orders classes by probability, ties by class", "[predictor]") {
  Tensor p(Shape{2, 4});
  p.set_values({0.1f, 0.4f, 0.1f, 0.4f, 0.7f, 0.1f, 0.2f, 0.0f});
  CHECK(top_k(p, 3) == std::vector<std::vector<int64_t>>{{1, 3, 0}, {0, 2, 1}});
  CHECK(top_k(p, 9)[0].size() == 4);
  CHECK_THROWS_WITH(top_k(p, 0), Catch::Contains("k must be at least 1"));
}

TEST_CASE("a checkpoint of any layout predicts at any batch size and evaluates as training did",
          "[predictor][e2e]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  testing::TempDir dir;
  const double trained_accuracy = train_mlp(dir.file("mlp.ckpt"));
  // The test split through the predictor: the accuracy the trainer measured.
  const Evaluation e = evaluate_test_split(mlp_predictor(dir.file("mlp.ckpt"), 100),
                                           kFashionMnistDir, 0.2860, 0.3530, 1000);
  CHECK(e.samples == 1000);
  CHECK(e.accuracy == Approx(trained_accuracy).epsilon(1e-9));
  int64_t total = 0, diagonal = 0;
  for (size_t t = 0; t < e.confusion.size(); ++t)
    for (size_t c = 0; c < e.confusion[t].size(); ++c) {
      total += e.confusion[t][c];
      if (t == c) diagonal += e.confusion[t][c];
    }
  CHECK(total == 1000);
  CHECK(diagonal == std::llround(e.accuracy * 1000));

  // Batches of 1 and of 3 give one image the same probabilities.
  Tensor three(Shape{3, 1, 28, 28});
  std::vector<float> pixels(3 * 784);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = std::sin(0.01f * i);
  three.set_values(pixels);
  Tensor one(Shape{1, 1, 28, 28});
  one.set_values(std::vector<float>(pixels.begin(), pixels.begin() + 784));
  Predictor big(mlp_predictor(dir.file("mlp.ckpt"), 8)),
      small(mlp_predictor(dir.file("mlp.ckpt"), 1));
  CHECK(big.info().model == "mlp");
  CHECK(big.info().iteration == 100);
  const std::vector<float> p3 = big.probabilities(three).values();
  const std::vector<float> p1 = small.probabilities(one).values();
  REQUIRE(p3.size() == 30);
  double sum = 0;
  for (int c = 0; c < 10; ++c) {
    CHECK(p1[c] == Approx(p3[c]).margin(1e-6));
    sum += p1[c];
  }
  CHECK(sum == Approx(1.0).margin(1e-5));
  CHECK_THROWS_WITH(small.probabilities(three),
                    Catch::Contains("for a model built for up to 1 images"));

  // The predictor runs the fused graph, with the unfused graph's probabilities.
  const auto count = [](const Graph& g, const std::string& type) {
    int n = 0;
    for (const auto& op : g.ops()) n += op->type() == type;
    return n;
  };
  CHECK(count(small.graph(), "bias_relu") == 2);
  CHECK(count(small.graph(), "relu") == 0);
  PredictorOptions unfused_options = mlp_predictor(dir.file("mlp.ckpt"), 1);
  unfused_options.fuse = false;
  Predictor unfused(unfused_options);
  CHECK(count(unfused.graph(), "bias_relu") == 0);
  CHECK(unfused.probabilities(one).values() == p1);

  // The weights alone: a smaller file that predicts the same.
  export_weights(mlp_predictor(dir.file("mlp.ckpt"), 1), dir.file("mlp.weights"));
  CHECK(std::filesystem::file_size(dir.file("mlp.weights")) <
        std::filesystem::file_size(dir.file("mlp.ckpt")) * 6 / 10);
  Predictor exported(mlp_predictor(dir.file("mlp.weights"), 1));
  CHECK(exported.probabilities(one).values() == p1);

  // The forward graph exported, imported as a graph of its own, its weights set by name: the
  // same probabilities.
  for (const char* name : {"mlp.pbtxt", "mlp.pb"}) {
    INFO(name);
    export_forward_graph(mlp_predictor(dir.file("mlp.ckpt"), 1), dir.file(name));
    std::unique_ptr<Graph> imported = import_graph(dir.file(name));
    CHECK(load_tensors_by_name(*imported, dir.file("mlp.ckpt")) == 6);  // 3 weights, 3 biases
    // An endless file is refused after what the graph's blobs could need.
    CHECK_THROWS_WITH(
        load_tensors_by_name(*imported, "/dev/zero"),
        Catch::Contains("holds more than the") && Catch::Contains("this model could need"));
    imported->blob("images")->tensor().set_values(one.values());
    Runnable run(*imported, RunOptions{});
    run.run();
    CHECK(imported->blob("probabilities")->tensor().values() == p1);
  }
  {
    std::ofstream(dir.file("bad.pbtxt")) << "name: \"x\"\nops { name: \"a\" type: \"warp\" }\n";
    std::ofstream(dir.file("garbage.pbtxt")) << "this is not a graph";
  }
  CHECK_THROWS_WITH(import_graph(dir.file("bad.pbtxt")),
                    Catch::Contains("bad.pbtxt'") && Catch::Contains("op 'a'") &&
                        Catch::Contains("unknown operator type 'warp'"));
  CHECK_THROWS_WITH(import_graph(dir.file("garbage.pbtxt")),
                    Catch::Contains("does not parse as a protobuf text GraphProto"));

  // Bad files are refused, naming them.
  PredictorOptions wrong = mlp_predictor(dir.file("mlp.ckpt"), 1);
  wrong.model = "lenet";
  CHECK_THROWS_WITH(Predictor(wrong), Catch::Contains("is of model 'mlp'"));
  CHECK_THROWS_WITH(Predictor(mlp_predictor(dir.file("none"), 1)),
                    Catch::Contains(dir.file("none")));
}

TEST_CASE("the predictor holds resnet20's activations in channel blocks, the same probabilities",
          "[predictor][channel_blocks]") {
  testing::TempDir dir;
  TrainOptions o;
  o.model = "resnet20";
  o.data_dir = "synthetic:1x28x28:10";
  o.max_iters = 2;
  o.batch = 8;
  o.evaluate = false;
  o.checkpoint_path = dir.file("resnet20.ckpt");
  Trainer(o).train();
  PredictorOptions p;
  p.model = "resnet20";
  p.weights = dir.file("resnet20.ckpt");
  p.images = {4, 1, 28, 28};
  Predictor blocked(p);
  p.fuse = false;
  Predictor plain(p);
  const auto blocked_blobs = [](const Graph& g) {
    int n = 0;
    for (const auto& blob : g.blobs()) n += blob->channel_block() > 0;
    return n;
  };
  CHECK(blocked_blobs(blocked.graph()) > 10);
  CHECK(blocked_blobs(plain.graph()) == 0);
  Rng rng(5);
  Tensor images(p.images);
  std::vector<float> pixels(static_cast<size_t>(images.count()));
  for (float& v : pixels) v = static_cast<float>(rng.uniform(0, 1));
  images.set_values(pixels);
  const std::vector<float> got = blocked.probabilities(images).values();
  CHECK(got == plain.probabilities(images).values());
  CHECK(got.size() == 40);
}
