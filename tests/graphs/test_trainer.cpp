// End to end: training the mlp on a slice of Fashion-MNIST learns, and is deterministic.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "graphs/trainer.hpp"

using namespace purine;

namespace {
const char kData[] = "/usr/share/datasets/fashion-mnist";

bool have_data() {
  struct stat st;
  return stat((std::string(kData) + "/train-images-idx3-ubyte.gz").c_str(), &st) == 0;
}

TrainOptions small_mlp_run(dispatch::Mode mode) {
  TrainOptions o;
  o.model = "mlp";
  o.data_dir = kData;
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
  if (!have_data()) {
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
  if (!have_data()) {
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

TEST_CASE("bad trainer options are rejected before training", "[trainer]") {
  TrainOptions o;
  o.batch = 0;
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("--batch must be positive, got 0"));
  o = TrainOptions();
  o.model = "resnet9000";
  o.max_iters = 1;
  if (have_data()) {
    REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("unknown model 'resnet9000'") &&
                                        Catch::Contains("convnet") && Catch::Contains("mlp"));
  }
  o = TrainOptions();
  o.data_dir = "/nonexistent/fmnist";
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("/nonexistent/fmnist"));
}
