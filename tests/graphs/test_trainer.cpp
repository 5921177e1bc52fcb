// End to end: training the mlp on a slice of Fashion-MNIST learns, and is deterministic.

#include <catch2/catch.hpp>

#include "fashion_mnist.hpp"
#include "graphs/trainer.hpp"
#include "temp_dir.hpp"

using namespace purine;

namespace {
using testing::have_fashion_mnist;
using testing::kFashionMnistDir;

TrainOptions small_mlp_run(dispatch::Mode mode) {
  TrainOptions o;
  o.model = "mlp";
  o.data_dir = kFashionMnistDir;
  o.max_iters = 150;
  o.batch = 64;
  o.lr = 0.05;
  o.threads = 2;
  o.seed = 5;
  o.mode = mode;
  o.test_samples = 1000;
  return o;
}
}  // namespace

TEST_CASE("mlp trains well above chance on a Fashion-MNIST slice", "[trainer][e2e]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  Trainer trainer(small_mlp_run(dispatch::Mode::kParallel));
  int calls = 0;
  TrainResult r = trainer.train([&](const TrainProgress& p) {
    ++calls;
    REQUIRE(p.iteration == calls);
    REQUIRE(p.total_iterations == 150);
  });
  REQUIRE(calls == 150);
  REQUIRE(r.iterations == 150);
  REQUIRE(r.final_loss < 1.0);      // starts near ln(10) = 2.3
  REQUIRE(r.test_accuracy > 0.70);  // chance is 0.10
  REQUIRE(r.images_per_sec > 0);
}

TEST_CASE("training is bit-identical across runs and dispatchers", "[trainer][e2e]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  auto losses = [](dispatch::Mode mode) {
    TrainOptions o = small_mlp_run(mode);
    o.max_iters = 20;
    o.evaluate = false;
    Trainer trainer(o);
    std::vector<double> out;
    trainer.train([&](const TrainProgress& p) { out.push_back(p.loss); });
    return out;
  };
  auto serial = losses(dispatch::Mode::kSerial);
  REQUIRE(serial.size() == 20);
  REQUIRE(losses(dispatch::Mode::kParallel) == serial);
  REQUIRE(losses(dispatch::Mode::kParallel) == serial);
}

TEST_CASE("a resumed run continues exactly where its checkpoint stopped", "[trainer][e2e]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  // 30 iterations in one go against 12, a checkpoint, and a resumed run of the remaining 18,
  // with a step schedule so that the learning rate depends on the iteration (but not on the
  // total). An epoch is 20 batches here, so the resumed run starts mid-epoch and crosses into
  // the next one (a new shuffle).
  TrainOptions o = small_mlp_run(dispatch::Mode::kParallel);
  o.max_iters = 30;
  o.batch = 3000;
  o.evaluate = false;
  o.lr_policy = "step";
  o.lr_step = 7;
  // The losses of a train() call that ends at iteration `total`.
  auto losses_of = [](Trainer& trainer, int64_t total) {
    std::vector<double> out;
    int64_t last = 0;
    trainer.train([&](const TrainProgress& p) {
      out.push_back(p.loss);
      last = p.iteration;
      REQUIRE(p.total_iterations == total);
    });
    REQUIRE(last == total);
    return out;
  };
  Trainer whole(o);
  const std::vector<double> expected = losses_of(whole, 30);
  REQUIRE(expected.size() == 30);

  testing::TempDir dir;
  TrainOptions first_part = o;
  first_part.max_iters = 12;
  Trainer first(first_part);
  std::vector<double> losses = losses_of(first, 12);
  first.save_checkpoint(dir.file("ckpt"));
  Trainer second(o);
  second.load_checkpoint(dir.file("ckpt"));
  const std::vector<double> rest = losses_of(second, 30);
  REQUIRE(rest.size() == 18);
  losses.insert(losses.end(), rest.begin(), rest.end());
  REQUIRE(losses == expected);  // bit for bit
}

TEST_CASE("bad trainer options are rejected before training", "[trainer]") {
  TrainOptions o;
  o.batch = 0;
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("--batch must be positive, got 0"));
  o = TrainOptions();
  o.model = "resnet9000";
  o.max_iters = 1;
  if (have_fashion_mnist()) {
    REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("unknown model 'resnet9000'") &&
                                        Catch::Contains("convnet") && Catch::Contains("mlp"));
  }
  o = TrainOptions();
  o.data_dir = "/nonexistent/fmnist";
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("/nonexistent/fmnist"));
}
