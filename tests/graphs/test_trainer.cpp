// End to end: training the mlp on a slice of Fashion-MNIST learns, and is deterministic; with
// several CPU locations in one process (a replica each) it follows the one-location trajectory.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>

#include "fashion_mnist.hpp"
#include "graphs/trainer.hpp"
#include "purine/graph.hpp"
#include "temp_dir.hpp"

using namespace purine;

namespace {
using testing::have_fashion_mnist;
using testing::kFashionMnistDir;

std::vector<float> values_of(const Tensor& t) { return {t.data(), t.data() + t.count()}; }

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

namespace {
struct LocationsRun {
  std::vector<double> losses;
  std::map<Location, std::vector<float>> weights;  // every replica's, by location
};

LocationsRun train_over_locations(int locations, const std::string& reduce) {
  TrainOptions o = small_mlp_run(dispatch::Mode::kParallel);
  o.max_iters = 20;
  o.batch = 48;  // splits over 1, 2 and 3 locations
  o.evaluate = false;
  o.locations = locations;
  o.reduce = reduce;
  Trainer trainer(o);
  LocationsRun run;
  trainer.train([&](const TrainProgress& p) { run.losses.push_back(p.loss); });
  for (const Parameter& p : trainer.training_graph().parameters()) {
    std::vector<float>& all = run.weights[p.blob->location()];
    const std::vector<float> v = values_of(p.blob->tensor());
    all.insert(all.end(), v.begin(), v.end());
  }
  return run;
}
}  // namespace

TEST_CASE("replicas at several CPU locations of one process follow the one-location run",
          "[trainer][e2e][locations]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  const LocationsRun reference = train_over_locations(1, "ring");
  REQUIRE(reference.losses.size() == 20);
  REQUIRE(reference.weights.size() == 1);
  for (const char* reduce : {"ring", "ps"}) {
    for (int locations : {2, 3}) {
      INFO(locations << " locations, reduce=" << reduce);
      const LocationsRun run = train_over_locations(locations, reduce);
      REQUIRE(run.losses.size() == 20);
      double worst = 0;
      for (size_t i = 0; i < run.losses.size(); ++i)
        worst = std::max(
            worst, std::abs(run.losses[i] - reference.losses[i]) / std::abs(reference.losses[i]));
      INFO("worst relative loss difference " << worst);
      CHECK(worst < 1e-5);
      REQUIRE(run.weights.size() == static_cast<size_t>(locations));
      for (const auto& [location, weights] : run.weights) {
        CHECK(location.rank == 0);
        CHECK(weights == run.weights.begin()->second);  // the replicas agree, bit for bit
      }
      CHECK(train_over_locations(locations, reduce).losses == run.losses);  // repeatable
    }
  }
}

TEST_CASE("a checkpoint of a run over several locations resumes only with as many",
          "[trainer][e2e][locations]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  TrainOptions o = small_mlp_run(dispatch::Mode::kParallel);
  o.max_iters = 16;
  o.evaluate = false;
  o.lr_policy = "step";  // the rate of an iteration does not depend on the run's total
  o.lr_step = 5;
  o.locations = 2;
  auto last_loss = [](Trainer& trainer) { return trainer.train().final_loss; };
  Trainer whole(o);
  const double expected = last_loss(whole);

  testing::TempDir dir;
  TrainOptions first_part = o;
  first_part.max_iters = 7;
  Trainer first(first_part);
  last_loss(first);
  first.save_checkpoint(dir.file("ckpt"));
  Trainer second(o);
  second.load_checkpoint(dir.file("ckpt"));
  REQUIRE(last_loss(second) == expected);  // bit for bit

  TrainOptions one_location = o;
  one_location.locations = 1;
  Trainer other(one_location);
  REQUIRE_THROWS_WITH(
      other.load_checkpoint(dir.file("ckpt")),
      Catch::Contains("was saved with --reduce=ring --bucket-kb=256 --locations=2") &&
          Catch::Contains("this run has one replica"));
}

TEST_CASE("bad location options are rejected before training", "[trainer][locations]") {
  TrainOptions o;
  o.locations = 0;
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("--locations must be positive, got 0"));
  o.locations = 3;
  o.batch = 64;
  REQUIRE_THROWS_WITH(Trainer(o),
                      Catch::Contains("--batch 64 does not split evenly over 3 locations"));
  o.locations = 2;
  o.reduce = "mpi";
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("--reduce=mpi joins one replica per rank") &&
                                      Catch::Contains("use ring or ps"));
}
