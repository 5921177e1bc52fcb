// Trainer::request_stop: train() finishes the iteration, saves the checkpoints the options ask
// for, skips the evaluation and says it stopped; the checkpoint resumes to the unbroken run.
// The CLI's SIGINT/SIGTERM handling: tests/tools/test_signal.cpp.

#include <signal.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <thread>

#include "temp_dir.hpp"
#include "train/checkpoint_dir.hpp"
#include "train/trainer.hpp"

using namespace purine;

namespace {

// A short mlp run on synthetic images; a fixed rate, so that an iteration's update does not
// depend on the run's total.
TrainOptions synthetic_run(int64_t max_iters) {
  TrainOptions o;
  o.model = "mlp";
  o.data_dir = "synthetic:1x28x28:10";
  o.max_iters = max_iters;
  o.batch = 8;
  o.threads = 1;
  o.lr_policy = LrPolicy::kFixed;
  o.test_samples = 200;
  return o;
}

}  // namespace

TEST_CASE("request_stop ends train() after the iteration, with its checkpoints",
          "[trainer][stop]") {
  testing::TempDir temp;
  TrainOptions o = synthetic_run(1000);
  o.checkpoint_dir = temp.file("ckpts");
  o.checkpoint_every = 2;
  o.checkpoint_path = temp.file("one.ckpt");
  Trainer trainer(o);
  int64_t last = 0;
  const TrainResult r = trainer.train([&](const TrainProgress& p) {
    last = p.iteration;
    if (p.iteration == 4) trainer.request_stop(SIGINT);
  });
  CHECK(last == 4);  // progress saw the last iteration
  CHECK(r.stopped);
  CHECK(r.stop_signal == SIGINT);
  CHECK(r.iterations == 4);
  CHECK(r.iteration == 4);
  CHECK(r.test_accuracy == 0);  // the evaluation is skipped
  // The periodic save of iteration 4 is the stop's: written once, listed first.
  const std::string newest = checkpoint_file(o.checkpoint_dir, 4);
  REQUIRE(r.checkpoints == std::vector<std::string>{newest, o.checkpoint_path});
  CHECK(list_checkpoints(o.checkpoint_dir).front().second == newest);
  CHECK(std::filesystem::exists(o.checkpoint_path));
}

TEST_CASE("a stopped run resumes to the loss of the unbroken run", "[trainer][stop]") {
  testing::TempDir temp;
  TrainOptions o = synthetic_run(10);
  o.evaluate = false;
  o.checkpoint_dir = temp.file("ckpts");
  {
    Trainer first(o);
    const TrainResult r = first.train([&](const TrainProgress& p) {
      if (p.iteration == 3) first.request_stop();
    });
    REQUIRE(r.stopped);
    CHECK(r.stop_signal == 0);
    CHECK(r.iteration == 3);
  }
  o.resume = true;
  Trainer resumed(o);
  REQUIRE(resumed.resume() == checkpoint_file(o.checkpoint_dir, 3));
  const TrainResult rest = resumed.train();
  CHECK(!rest.stopped);
  CHECK(rest.iterations == 7);

  TrainOptions whole_options = synthetic_run(10);
  whole_options.evaluate = false;
  const TrainResult whole = Trainer(whole_options).train();
  CHECK(rest.final_loss == whole.final_loss);
}

TEST_CASE("request_stop from another thread, or before train(), stops after one iteration",
          "[trainer][stop]") {
  TrainOptions o = synthetic_run(1000000);
  o.evaluate = false;
  {
    Trainer trainer(o);
    trainer.request_stop(SIGTERM);
    const TrainResult r = trainer.train();
    CHECK(r.stopped);
    CHECK(r.stop_signal == SIGTERM);
    CHECK(r.iterations == 1);
    CHECK(r.checkpoints.empty());  // the options ask for none
  }
  Trainer trainer(o);
  std::thread stopper;
  const TrainResult r = trainer.train([&](const TrainProgress& p) {
    if (p.iteration == 2) stopper = std::thread([&] { trainer.request_stop(SIGTERM); });
  });
  stopper.join();
  CHECK(r.stopped);
  CHECK(r.stop_signal == SIGTERM);
  CHECK(r.iterations >= 2);
  CHECK(r.iterations < 1000000);
}
