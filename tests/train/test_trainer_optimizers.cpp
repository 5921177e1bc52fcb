// Adam and AdamW through the Trainer (--optimizer): they train, their moments are checkpointed
// by single-device name like SGD's history, and a resumed run continues bit for bit (the step
// number comes from the iteration count).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <vector>

#include "fashion_mnist.hpp"
#include "purine/serialize.hpp"
#include "temp_dir.hpp"
#include "train/trainer.hpp"

using namespace purine;
using testing::have_fashion_mnist;
using testing::kFashionMnistDir;

namespace {

TrainOptions adam_run(Optimizer optimizer, int64_t iterations) {
  TrainOptions o;
  o.model = "mlp";
  o.data_dir = kFashionMnistDir;
  o.max_iters = iterations;
  o.batch = 32;
  o.lr = 0.002;
  o.lr_policy = LrPolicy::kFixed;
  o.weight_decay = 0.01;
  o.optimizer = optimizer;
  o.threads = 2;
  o.seed = 9;
  o.evaluate = false;
  return o;
}

std::vector<double> losses_of(Trainer& trainer) {
  std::vector<double> losses;
  trainer.train([&](const TrainProgress& p) { losses.push_back(p.loss); });
  return losses;
}

}  // namespace

TEST_CASE("Adam and AdamW train, and a resumed run continues bit for bit",
          "[trainer][e2e][optimizer]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  for (Optimizer optimizer : {Optimizer::kAdam, Optimizer::kAdamW}) {
    INFO(name_of(optimizer));
    Trainer straight(adam_run(optimizer, 40));
    const std::vector<double> all = losses_of(straight);
    REQUIRE(all.size() == 40);
    CHECK(all.back() < 0.6 * all.front());
    testing::TempDir dir;
    TrainOptions first_half = adam_run(optimizer, 40);
    first_half.max_iters = 20;
    first_half.checkpoint_path = dir.file("half");
    Trainer(first_half).train();
    Trainer resumed(adam_run(optimizer, 40));
    resumed.load_checkpoint(dir.file("half"));
    const std::vector<double> rest = losses_of(resumed);
    CHECK(rest == std::vector<double>(all.begin() + 20, all.end()));
    // The moments are in the file by single-device name, and not zero.
    const proto::Checkpoint c = read_checkpoint(dir.file("half"), 1 << 30);
    int moments = 0;
    for (const auto& t : c.tensors())
      if (t.name().find("::adam_") != std::string::npos) {
        ++moments;
        CHECK(std::any_of(t.tensor().data().begin(), t.tensor().data().end(),
                          [](float v) { return v != 0; }));
      }
    CHECK(moments == 2 * 6);  // m and v of 3 weights and 3 biases
  }
}

TEST_CASE("Adam's moments move between layouts like SGD's history", "[trainer][optimizer]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  testing::TempDir dir;
  TrainOptions saver = adam_run(Optimizer::kAdam, 5);
  saver.parallel = ParallelLayout::kData;
  saver.locations = 2;
  saver.bucket_kb = 0;  // every gradient alone: the ring shards the moments over the locations
  saver.checkpoint_path = dir.file("a");
  Trainer(saver).train();
  TrainOptions o = adam_run(Optimizer::kAdam, 10);
  o.parallel = ParallelLayout::kModel;
  o.split = {"fc1", "fc2"};
  o.locations = 3;
  Trainer resumed(o);
  resumed.load_checkpoint(dir.file("a"));
  resumed.save_checkpoint(dir.file("b"));
  const proto::Checkpoint a = read_checkpoint(dir.file("a"), 1 << 30);
  const proto::Checkpoint b = read_checkpoint(dir.file("b"), 1 << 30);
  std::map<std::string, std::vector<float>> saved;
  for (const auto& t : a.tensors())
    saved[t.name()] = {t.tensor().data().begin(), t.tensor().data().end()};
  REQUIRE(b.tensors_size() == a.tensors_size());
  for (const auto& t : b.tensors()) {
    INFO(t.name());
    REQUIRE(saved.count(t.name()));
    CHECK(saved[t.name()] ==
          std::vector<float>(t.tensor().data().begin(), t.tensor().data().end()));
  }
}

TEST_CASE("bad Adam settings are refused before training", "[trainer][optimizer]") {
  TrainOptions o = adam_run(Optimizer::kAdam, 5);
  o.beta2 = 1.0;
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("--beta1 and --beta2 must be in [0, 1)"));
  o.beta2 = 0.999;
  o.eps = 0;
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("--eps must be positive, got 0"));
  REQUIRE_THROWS_WITH(parse_optimizer("lion"),
                      "unknown optimizer 'lion' for --optimizer; choose sgd, adam or adamw");
}

namespace {

// The weights of a trainer's graph by single-device name (histories and moments left out).
std::map<std::string, std::vector<float>> weights_of(const Trainer& trainer) {
  std::map<std::string, std::vector<float>> weights;
  for (const StoredTensor& t : trainer.checkpoint_map()) {
    if (t.name.find("::history") != std::string::npos) continue;
    weights[t.name] = stored_values(t);
  }
  return weights;
}

// The global norm of one plain SGD step (lr 1, no momentum or decay) with --clip-norm=0.01.
double clipped_step_norm(ParallelLayout layout, int locations) {
  TrainOptions o = adam_run(Optimizer::kSgd, 1);
  o.lr = 1;
  o.momentum = 0;
  o.weight_decay = 0;
  o.clip_norm = 0.01;
  o.parallel = layout;
  o.locations = locations;
  if (layout == ParallelLayout::kModel) o.split = {"fc1", "fc2"};
  Trainer trainer(o);
  const auto before = weights_of(trainer);
  trainer.train();
  const auto after = weights_of(trainer);
  double squares = 0;
  for (const auto& [name, values] : before)
    for (size_t i = 0; i < values.size(); ++i) {
      const double d = after.at(name)[i] - values[i];
      squares += d * d;
    }
  return std::sqrt(squares);
}

}  // namespace

TEST_CASE("gradients clipped by global norm, as clip_grad_norm_, in any layout",
          "[trainer][e2e][optimizer]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  // A step of lr 1 moves the weights by exactly the clipped gradient: its norm is max_norm
  // (the gradient's own norm is far above 0.01), the norm of the replicas' average gradient
  // when two locations share the batch.
  CHECK(clipped_step_norm(ParallelLayout::kNone, 1) == Approx(0.01).epsilon(1e-4));
  CHECK(clipped_step_norm(ParallelLayout::kData, 2) == Approx(0.01).epsilon(1e-4));
  CHECK(clipped_step_norm(ParallelLayout::kModel, 2) == Approx(0.01).epsilon(1e-4));
  // A norm never reached scales by exactly 1: the run is the unclipped one, bit for bit.
  TrainOptions loose = adam_run(Optimizer::kAdam, 10);
  const std::vector<double> plain = [&] {
    Trainer t(loose);
    return losses_of(t);
  }();
  loose.clip_norm = 1e9;
  Trainer clipped(loose);
  CHECK(losses_of(clipped) == plain);
  loose.clip_norm = -1;
  CHECK_THROWS_WITH(Trainer(loose), Catch::Contains("--clip-norm must be non-negative"));
}
