// End to end: training the mlp on a slice of Fashion-MNIST learns, and is deterministic; with
// several CPU locations in one process (a replica each) it follows the one-location trajectory;
// checkpoints resume in any layout. Pipelines and split layers: test_trainer_layouts.cpp.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "fashion_mnist.hpp"
#include "operators/cuda/gpu_test.hpp"
#include "purine/graph.hpp"
#include "purine/serialize.hpp"
#include "temp_dir.hpp"
#include "train/checkpoint_dir.hpp"
#include "train/trainer.hpp"

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

TEST_CASE("training evaluates every epoch or every N iterations, the same images each time",
          "[trainer][e2e]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  TrainOptions o = small_mlp_run(dispatch::Mode::kParallel);
  o.batch = 2000;  // 30 iterations an epoch
  o.max_iters = 65;
  o.lr_policy = LrPolicy::kFixed;  // a rate that does not depend on the run's total
  o.test_samples = 300;
  REQUIRE(o.test_every == kTestEveryEpoch);  // the default
  Trainer trainer(o);
  std::vector<std::pair<int64_t, double>> reported;
  const TrainResult r = trainer.train([&](const TrainProgress& p) {
    if (p.test_accuracy) reported.emplace_back(p.iteration, *p.test_accuracy);
  });
  REQUIRE(r.evaluations.size() == 2);
  CHECK(r.evaluations[0].first == 30);
  CHECK(r.evaluations[1].first == 60);
  CHECK(reported == r.evaluations);
  CHECK(r.evaluations[0].second > 0.5);
  // Every evaluation reads the same test images from the first.
  CHECK(trainer.evaluate() == r.test_accuracy);
  // A run that stops at the first evaluation gets its accuracy, evaluating only at its end; one
  // that evaluates every 20 iterations trains to the same loss.
  TrainOptions shorter = o;
  shorter.max_iters = 30;
  shorter.test_every = 0;
  const TrainResult s = Trainer(shorter).train();
  CHECK(s.evaluations.empty());
  CHECK(s.test_accuracy == r.evaluations[0].second);
  TrainOptions every20 = o;
  every20.test_every = 20;
  const TrainResult t = Trainer(every20).train();
  REQUIRE(t.evaluations.size() == 3);
  CHECK(t.evaluations[2].first == 60);
  CHECK(t.evaluations[2].second == r.evaluations[1].second);
  CHECK(t.final_loss == r.final_loss);
  CHECK(t.test_accuracy == r.test_accuracy);
}

TEST_CASE("training is bit-identical across runs and dispatchers", "[trainer][e2e][determinism]") {
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

TEST_CASE("convnet training, with and without batch norm, is bit-identical for any thread count",
          "[trainer][e2e][determinism]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  // Every convolution direction of the 2-conv network, oneDNN and im2col, with several threads;
  // convnet_bn (the default model) adds batch norm's per-channel sums.
  for (const char* model : {"convnet", "convnet_bn"}) {
    INFO(model);
    auto losses = [&](int threads) {
      TrainOptions o = small_mlp_run(dispatch::Mode::kParallel);
      o.model = model;
      o.max_iters = 4;
      o.threads = threads;
      o.evaluate = false;
      Trainer trainer(o);
      std::vector<double> out;
      trainer.train([&](const TrainProgress& p) { out.push_back(p.loss); });
      return out;
    };
    const std::vector<double> one = losses(1);
    REQUIRE(one.size() == 4);
    for (int threads : {2, 3}) {
      INFO(threads << " threads");
      CHECK(losses(threads) == one);
    }
  }
}

TEST_CASE("the trainer follows the schedule's milestones and warmup", "[trainer][e2e]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  // Milestones are fractions of the run: 0.3 and 0.8 of 10 iterations are iterations 3 and 8.
  TrainOptions o = small_mlp_run(dispatch::Mode::kParallel);
  o.max_iters = 10;
  o.evaluate = false;
  o.lr = 0.1;
  o.lr_policy = LrPolicy::kMultistep;
  o.lr_milestones = {0.3, 0.8};
  o.lr_gamma = 0.5;
  o.lr_warmup = 2;
  o.lr_warmup_start = 0.5;
  Trainer trainer(o);
  std::vector<double> rates;
  trainer.train([&](const TrainProgress& p) { rates.push_back(p.learning_rate); });
  const std::vector<double> expected = {0.05, 0.075, 0.1,  0.05,  0.05,
                                        0.05, 0.05,  0.05, 0.025, 0.025};
  REQUIRE(rates.size() == expected.size());
  for (size_t i = 0; i < rates.size(); ++i) CHECK(rates[i] == Approx(expected[i]));
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
  o.lr_policy = LrPolicy::kStep;
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
  o = TrainOptions();
  o.parallel = ParallelLayout::kData;
  o.locations = 2;
  o.ring_steps = RingSteps::kMachines;  // without machine_of_rank
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("--ring-steps=machines needs the machine of "
                                                  "every rank, but TrainOptions::machine_of_rank "
                                                  "has 0 for 1 ranks"));
  // Numbers that would train nothing, or crash.
  const auto rejected = [](auto change, const char* message) {
    TrainOptions bad;
    bad.max_iters = 1;
    change(bad);
    REQUIRE_THROWS_WITH(Trainer(bad), Catch::Contains(message));
  };
  rejected([](TrainOptions& b) { b.lr = std::nan(""); },
           "--lr must be positive and finite, got nan");
  rejected([](TrainOptions& b) { b.lr = INFINITY; }, "--lr must be positive and finite, got inf");
  rejected([](TrainOptions& b) { b.weight_decay = -1e-4; }, "--weight-decay must be non-negative");
  rejected([](TrainOptions& b) { b.weight_decay = NAN; }, "--weight-decay must be non-negative");
  rejected([](TrainOptions& b) { b.epochs = 0; }, "--epochs must be positive, got 0");
  rejected([](TrainOptions& b) { b.lr_step = -3; }, "--lr-step must be non-negative");
  rejected([](TrainOptions& b) { b.threads = 100000; }, "--threads must be in [1, 1024]");
  rejected([](TrainOptions& b) { b.momentum = 1.5; }, "--momentum must be in [0, 1)");
  rejected([](TrainOptions& b) { b.classes = 0; }, "--classes must be positive");
  rejected([](TrainOptions& b) { b.input_std = 0; }, "--input-std must be positive");
}

TEST_CASE("a diverging run stops at the first non-finite loss, naming the blob", "[trainer]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  testing::TempDir dir;
  TrainOptions o = small_mlp_run(dispatch::Mode::kParallel);
  o.lr = 1e30;
  o.lr_policy = LrPolicy::kFixed;
  o.max_iters = 6;
  o.checkpoint_dir = dir.path();
  o.checkpoint_every = 1;
  // At 1e30 the weights stay finite (and are saved) after the first update; the next loss is
  // not, and nothing is saved after it.
  o.lr = 1e30;
  Trainer trainer(o);
  REQUIRE_THROWS_WITH(
      trainer.train(),
      Catch::Contains("training diverged at iteration 2: the loss of replica 0 is") &&
          Catch::Contains("nan") && Catch::Contains("the parameter 'replica0::mlp::fc1::weight'"));
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    files.push_back(entry.path().string());
  CHECK(files == std::vector<std::string>{checkpoint_file(dir.path(), 1)});
}

TEST_CASE("an update that makes a weight non-finite stops training at that iteration",
          "[trainer]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  TrainOptions o = small_mlp_run(dispatch::Mode::kParallel);
  o.max_iters = 4;
  o.evaluate = false;
  Trainer trainer(o);
  // A broken momentum history: the first loss is finite, the first update is not. The loss
  // check alone would stop one iteration later.
  Blob* history =
      const_cast<Graph&>(trainer.training_graph()).blob("replica0::mlp::fc2::weight::history");
  history->tensor().mutable_data()[5] = INFINITY;
  REQUIRE_THROWS_WITH(
      trainer.train(),
      Catch::Contains("training diverged at iteration 1: its update made a weight non-finite (the "
                      "first non-finite blob is the parameter 'replica0::mlp::fc2::weight')") &&
          Catch::Contains("before the update, the first non-finite blob is "
                          "'replica0::mlp::fc2::weight::"));
}

// The task runs a trace file holds ("X" events), and whether the file is complete.
std::pair<int, bool> trace_runs(const std::string& path) {
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int runs = 0;
  for (size_t at = text.find("\"ph\":\"X\""); at != std::string::npos;
       at = text.find("\"ph\":\"X\"", at + 1))
    ++runs;
  const std::string footer = "],\"displayTimeUnit\":\"ms\"}\n";
  return {runs, text.size() >= footer.size() &&
                    text.compare(text.size() - footer.size(), footer.size(), footer) == 0};
}

TEST_CASE("the trace holds every iteration and is complete after a failed run", "[trainer]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  testing::TempDir dir;
  TrainOptions o = small_mlp_run(dispatch::Mode::kParallel);
  o.evaluate = false;
  o.trace_path = dir.file("one.json");
  o.max_iters = 1;
  Trainer(o).train();
  const auto [per_iteration, one_complete] = trace_runs(o.trace_path);
  REQUIRE(one_complete);
  REQUIRE(per_iteration > 10);

  o.trace_path = dir.file("three.json");
  o.max_iters = 3;
  Trainer(o).train();
  CHECK(trace_runs(o.trace_path) == std::pair<int, bool>{3 * per_iteration, true});

  o.trace_path = dir.file("diverged.json");
  o.lr = 1e30;
  o.lr_policy = LrPolicy::kFixed;
  REQUIRE_THROWS_WITH(Trainer(o).train(), Catch::Contains("training diverged at iteration 2"));
  CHECK(trace_runs(o.trace_path) == std::pair<int, bool>{2 * per_iteration, true});
}

TEST_CASE("a checkpoint of non-finite weights is refused", "[trainer]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  testing::TempDir dir;
  TrainOptions o = small_mlp_run(dispatch::Mode::kParallel);
  o.max_iters = 2;
  o.evaluate = false;
  Trainer trainer(o);
  trainer.train();
  // As an update that overflowed would leave it.
  Blob* weight = const_cast<Graph&>(trainer.training_graph()).blob("replica0::mlp::fc2::weight");
  weight->tensor().mutable_data()[3] = INFINITY;
  REQUIRE_THROWS_WITH(trainer.save_checkpoint(dir.file("c")),
                      Catch::Contains("training diverged at iteration 2: the first non-finite blob "
                                      "is the parameter 'replica0::mlp::fc2::weight'") &&
                          Catch::Contains("no checkpoint written"));
  CHECK(std::filesystem::is_empty(dir.path()));
}

namespace {
struct LocationsRun {
  std::vector<double> losses;
  std::map<Location, std::vector<float>> weights;  // every replica's, by location
};

LocationsRun train_over_locations(int locations, Reduction reduce) {
  TrainOptions o = small_mlp_run(dispatch::Mode::kParallel);
  o.max_iters = 20;
  o.batch = 48;  // splits over 1, 2 and 3 locations
  o.evaluate = false;
  o.parallel = ParallelLayout::kData;
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
  const LocationsRun reference = train_over_locations(1, Reduction::kRing);
  REQUIRE(reference.losses.size() == 20);
  REQUIRE(reference.weights.size() == 1);
  for (Reduction reduce : {Reduction::kRing, Reduction::kParameterServer}) {
    for (int locations : {2, 3}) {
      INFO(locations << " locations, reduce=" << name_of(reduce));
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

namespace {
// Relative difference, for trajectories of different layouts (sums in another order).
double relative(double a, double b) { return std::abs(a - b) / std::abs(b); }

// The mlp with a step schedule (an iteration's rate does not depend on the run's total) over
// `locations` replicas of one process, 48 images per step.
TrainOptions layout_run(int locations, Reduction reduce, int64_t iterations) {
  TrainOptions o = small_mlp_run(dispatch::Mode::kParallel);
  o.max_iters = iterations;
  o.batch = 48;
  o.evaluate = false;
  o.lr_policy = LrPolicy::kStep;
  o.lr_step = 5;
  o.parallel = ParallelLayout::kData;
  o.locations = locations;
  o.reduce = reduce;
  return o;
}
}  // namespace

TEST_CASE("a checkpoint resumes in any layout and follows that layout's trajectory",
          "[trainer][e2e][locations]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  // Saved by 2 locations with the ring's sharded momentum (--bucket-kb=0: every parameter's
  // history cut in chunks over the locations) after 7 of 16 iterations.
  testing::TempDir dir;
  TrainOptions saver = layout_run(2, Reduction::kRing, 7);
  saver.bucket_kb = 0;
  saver.checkpoint_path = dir.file("ckpt");
  Trainer first(saver);
  first.train();
  struct Layout {
    int locations;
    Reduction reduce;
    int64_t bucket_kb;
  };
  const Reduction ring = Reduction::kRing;
  for (const Layout& l : {Layout{2, ring, 0}, Layout{1, ring, 256}, Layout{3, ring, 0},
                          Layout{3, ring, 256}, Layout{2, Reduction::kParameterServer, 256}}) {
    INFO(l.locations << " locations, reduce=" << name_of(l.reduce)
                     << ", bucket_kb=" << l.bucket_kb);
    TrainOptions o = layout_run(l.locations, l.reduce, 16);
    o.bucket_kb = l.bucket_kb;
    Trainer whole(o);
    const double expected = whole.train().final_loss;
    Trainer resumed(o);
    resumed.load_checkpoint(dir.file("ckpt"));
    const TrainResult r = resumed.train();
    CHECK(r.iterations == 9);
    INFO("unbroken " << expected << ", resumed " << r.final_loss);
    CHECK(relative(r.final_loss, expected) < 1e-5);
    // The layout that saved it continues bit for bit.
    if (l.locations == 2 && l.bucket_kb == 0) CHECK(r.final_loss == expected);
  }
}

TEST_CASE("a checkpoint's momentum is restored, not restarted, in another layout",
          "[trainer][e2e][locations]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  // Every state of the resuming layout (3 locations, sharded histories) comes from the file:
  // saved again at once, the file holds the same tensors as the one it loaded.
  testing::TempDir dir;
  TrainOptions saver = layout_run(2, Reduction::kParameterServer, 7);
  saver.checkpoint_path = dir.file("a");
  Trainer(saver).train();
  TrainOptions o = layout_run(3, Reduction::kRing, 16);
  o.bucket_kb = 0;
  Trainer resumed(o);
  resumed.load_checkpoint(dir.file("a"));
  resumed.save_checkpoint(dir.file("b"));
  const proto::Checkpoint a = read_checkpoint(dir.file("a"), 1 << 30);
  const proto::Checkpoint b = read_checkpoint(dir.file("b"), 1 << 30);
  REQUIRE(a.tensors_size() == b.tensors_size());
  std::map<std::string, std::vector<float>> saved;
  int histories = 0;
  for (const auto& t : a.tensors()) {
    saved[t.name()] = {t.tensor().data().begin(), t.tensor().data().end()};
    if (t.name().find("::history") != std::string::npos) {
      ++histories;
      CHECK(std::any_of(t.tensor().data().begin(), t.tensor().data().end(),
                        [](float v) { return v != 0; }));
    }
  }
  CHECK(histories > 0);
  for (const auto& t : b.tensors()) {
    INFO(t.name());
    REQUIRE(saved.count(t.name()));
    CHECK(saved[t.name()] ==
          std::vector<float>(t.tensor().data().begin(), t.tensor().data().end()));
  }
  CHECK(b.iteration() == 7);
  CHECK(b.layout() == "ranks=1 locations=3 reduce=ring bucket_kb=0");
}

TEST_CASE("checkpoints during training: every N iterations into a directory, the newest kept",
          "[trainer][e2e]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  testing::TempDir dir;
  TrainOptions o = layout_run(1, Reduction::kRing, 17);
  o.checkpoint_dir = dir.file("ckpts/run");  // created
  o.checkpoint_every = 5;
  o.keep = 2;
  Trainer trainer(o);
  const double expected = trainer.train().final_loss;
  std::vector<int64_t> iterations;
  for (const auto& [iteration, path] : list_checkpoints(o.checkpoint_dir))
    iterations.push_back(iteration);
  CHECK(iterations == std::vector<int64_t>{17, 15});  // 5 and 10 pruned; 17: the end

  // The newest resumes; a run continuing from 15 towards 17 ends where this one did.
  TrainOptions more = o;
  more.keep = 3;
  std::filesystem::remove(checkpoint_file(o.checkpoint_dir, 17));
  Trainer resumed(more);
  REQUIRE(resumed.resume_newest() == checkpoint_file(o.checkpoint_dir, 15));
  REQUIRE(resumed.train().final_loss == expected);
  // A run from the start into that directory is refused, and its files are left as they were.
  const auto before = list_checkpoints(o.checkpoint_dir);
  Trainer fresh(o);
  REQUIRE_THROWS_WITH(fresh.train(), Catch::Contains("--checkpoint-dir '" + o.checkpoint_dir +
                                                     "' already holds the checkpoints of a run "
                                                     "(the newest: " +
                                                     checkpoint_file(o.checkpoint_dir, 17)) &&
                                         Catch::Contains("continue that run with --resume"));
  CHECK(list_checkpoints(o.checkpoint_dir) == before);
  // Damaged files alone do not stop a run from the start (--resume would skip them too).
  TrainOptions beside_damaged = o;
  beside_damaged.checkpoint_dir = dir.file("damaged");
  beside_damaged.max_iters = 2;
  std::filesystem::create_directory(beside_damaged.checkpoint_dir);
  std::ofstream(checkpoint_file(beside_damaged.checkpoint_dir, 7)) << "half a checkpoint";
  CHECK(Trainer(beside_damaged).train().iterations == 2);
  // A damaged newest file is skipped for the one before.
  std::ofstream(checkpoint_file(o.checkpoint_dir, 99)) << "half a checkpoint";
  TrainOptions again = o;
  again.max_iters = 30;
  Trainer third(again);
  CHECK(third.resume_newest() == checkpoint_file(o.checkpoint_dir, 17));
}

TEST_CASE("a failure after training leaves its checkpoint", "[trainer][e2e]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  testing::TempDir dir;
  TrainOptions o = layout_run(1, Reduction::kRing, 4);
  o.evaluate = true;
  o.test_samples = 10;  // fewer than one test batch: evaluation fails after training
  o.checkpoint_path = dir.file("ckpt");
  Trainer trainer(o);
  REQUIRE_THROWS_WITH(trainer.train(), Catch::Contains("fewer than one test batch"));
  CHECK(read_checkpoint(dir.file("ckpt"), 1 << 30).iteration() == 4);
}

TEST_CASE("bad checkpoint options and output paths are rejected before training", "[trainer]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  TrainOptions o = layout_run(1, Reduction::kRing, 4);
  o.checkpoint_every = 5;
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("--checkpoint-every needs --checkpoint-dir"));
  o = layout_run(1, Reduction::kRing, 4);
  o.checkpoint_dir = "/etc/passwd/ckpts";
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("checkpoint directory '/etc/passwd/ckpts'"));
  o = layout_run(1, Reduction::kRing, 4);
  o.checkpoint_dir = "/tmp";
  o.keep = 0;
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("--keep must be at least 1, got 0"));
  o = layout_run(1, Reduction::kRing, 4);
  o.trace_path = "/nonexistent/dir/trace.json";
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("the trace file '/nonexistent/dir/trace.json'"));
  o = layout_run(1, Reduction::kRing, 4);
  o.checkpoint_path = "/nonexistent/dir/ckpt";
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("the checkpoint file '/nonexistent/dir/ckpt'"));
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
  o.reduce = Reduction::kMpi;
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("--reduce=mpi joins one replica per rank") &&
                                      Catch::Contains("use ring or ps"));
}

TEST_CASE("training on a GPU follows the CPU run's losses, or says why it cannot",
          "[trainer][gpu]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  TrainOptions o = small_mlp_run(dispatch::Mode::kParallel);
  o.max_iters = 30;
  o.evaluate = false;
  o.lr_policy = LrPolicy::kFixed;
  o.devices = {0};
  const std::string no_gpu = testing::no_gpu_reason();
  if (!no_gpu.empty()) {
    REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("rank0:gpu0") && Catch::Contains("GPU"));
    WARN("the GPU run is skipped: " << no_gpu);
    return;
  }
  auto losses = [](const TrainOptions& options) {
    std::vector<float> curve;
    Trainer(options).train([&curve](const TrainProgress& p) { curve.push_back(p.loss); });
    return curve;
  };
  const std::vector<float> gpu = losses(o);
  o.devices.clear();
  const std::vector<float> cpu = losses(o);
  REQUIRE(gpu.size() == cpu.size());
  // cuBLAS and oneDNN sum in other orders: the curves agree closely, not bit for bit.
  for (size_t i = 0; i < cpu.size(); ++i) {
    INFO("iteration " << i + 1);
    CHECK(gpu[i] == Approx(cpu[i]).epsilon(1e-3));
  }
}

TEST_CASE("the ring's steps option changes how chunks move, not the training's bits",
          "[trainer][e2e][locations]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  // 3 locations: bucketed (allreduce) and every gradient alone (sharded updates).
  for (int64_t bucket_kb : {256, 0}) {
    INFO("bucket_kb=" << bucket_kb);
    auto run = [bucket_kb](RingSteps steps) {
      TrainOptions o = layout_run(3, Reduction::kRing, 6);
      o.bucket_kb = bucket_kb;
      o.ring_steps = steps;
      o.machine_of_rank = {0};
      Trainer trainer(o);
      const double loss = trainer.train().final_loss;
      int sums = 0;
      for (const auto& op : trainer.training_graph().ops()) sums += op->type() == "sum";
      return std::make_pair(loss, sums);
    };
    const auto ring = run(RingSteps::kRing), direct = run(TrainOptions().ring_steps);
    const auto machines = run(RingSteps::kMachines);  // on one machine: direct steps
    CHECK(direct.first == ring.first);
    CHECK(machines == direct);
    // Direct steps sum each chunk once on its owner; the ring's steps twice (3 locations).
    CHECK(direct.second < ring.second);
  }
}

TEST_CASE("training computes no accuracy (it never reports one), evaluation does",
          "[trainer][e2e][locations]") {
  if (!have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  TrainOptions o = layout_run(2, Reduction::kRing, 20);
  o.micro_batches = 2;
  o.evaluate = true;
  Trainer trainer(o);
  for (const auto& op : trainer.training_graph().ops()) {
    INFO(op->name());
    CHECK(op->type() != "accuracy");
    CHECK(op->name().find("accuracy") == std::string::npos);
  }
  CHECK(trainer.train().test_accuracy > 0.3);
}
