// Prefetching (TrainOptions::prefetch, train/trainer.cpp's DataFeed): the data op of iteration
// i serves batch i+1 while the model trains on batch i (at a GPU, the copy of iteration i moves
// batch i+1 too), and the model still sees every batch in the order, and with the losses, of a
// run that serves each batch in its own iteration, through checkpoints and resumes as well.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "dispatcher/emulated_devices.hpp"
#include "dispatcher/observer.hpp"
#include "fashion_mnist.hpp"
#include "purine/graph.hpp"
#include "temp_dir.hpp"
#include "train/checkpoint_dir.hpp"
#include "train/trainer.hpp"

using namespace purine;
using testing::have_fashion_mnist;
using testing::kFashionMnistDir;

namespace {

// The mlp on Fashion-MNIST (shuffled: the batches differ, so an order mistake changes the
// losses), or on synthetic images where it is not installed.
TrainOptions small_run(int64_t iterations) {
  TrainOptions o;
  o.model = "mlp";
  o.data_dir = have_fashion_mnist() ? kFashionMnistDir : "synthetic:1x28x28:10";
  o.max_iters = iterations;
  o.batch = 32;
  o.lr = 0.05;
  o.lr_policy = LrPolicy::kFixed;
  o.threads = 1;
  o.seed = 7;
  o.evaluate = false;
  return o;
}

struct Trajectory {
  std::vector<double> losses;
  std::vector<std::vector<float>> weights;
};

Trajectory train(const TrainOptions& o) {
  Trainer trainer(o);
  Trajectory t;
  trainer.train([&](const TrainProgress& p) { t.losses.push_back(p.loss); });
  for (const Parameter& p : trainer.training_graph().parameters())
    t.weights.push_back(p.blob->tensor().values());
  return t;
}

// Holds the start of each run's data op (on the data thread) until the loss gradient of the same
// run, the last op to read the labels the model trains on, has finished. A data op that the model
// waits for would wait for ever: it gives up after `patience` and counts the run as not overlapped.
class HoldData : public dispatch::Observer {
 public:
  explicit HoldData(std::chrono::seconds patience) : patience_(patience) {}
  void on_task_start(const dispatch::TaskEvent& event) override {
    if (*event.task_name != "replica0::data") return;
    std::unique_lock<std::mutex> lock(mutex_);
    const int run = ++data_starts_;
    if (!changed_.wait_for(lock, patience_, [&] { return label_reads_ >= run; })) ++not_overlapped_;
  }
  void on_task_end(const dispatch::TaskEvent& event) override {
    if (*event.task_name != "replica0::loss::loss::grad::op0") return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++label_reads_;
    }
    changed_.notify_all();
  }
  int data_starts() const { return data_starts_; }
  int not_overlapped() const { return not_overlapped_; }

 private:
  const std::chrono::seconds patience_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int data_starts_ = 0;
  int label_reads_ = 0;
  int not_overlapped_ = 0;
};

// The losses of iterations `from`+1 .. of a train() call.
std::vector<double> losses_of(Trainer& trainer) {
  std::vector<double> out;
  trainer.train([&](const TrainProgress& p) { out.push_back(p.loss); });
  return out;
}

}  // namespace

TEST_CASE("the data op serves the next batch while the model trains on the current one",
          "[trainer][prefetch]") {
  TrainOptions o = small_run(4);
  Trainer trainer(o);
  const Graph& g = trainer.training_graph();
  // The model reads a batch no op of the run writes; the data op writes the next one, swapped
  // in after the run.
  const Blob* images = g.blob("replica0::images");
  const Blob* next = g.blob("replica0::images_next");
  CHECK(images->writers().empty());
  REQUIRE(next->writers().size() == 1);
  CHECK(next->writers()[0]->name() == "replica0::data");
  CHECK(next->readers().empty());
  CHECK(g.blob("replica0::labels")->writers().empty());
  const auto& swaps = g.swaps();
  CHECK(std::count(swaps.begin(), swaps.end(),
                   std::pair<Blob*, Blob*>(g.blob("replica0::images"),
                                           g.blob("replica0::images_next"))) == 1);
  // Each run's data op starts only once the model has read that run's labels for the last time,
  // and every run still completes: the model never waits for the data op of its run.
  HoldData hold(std::chrono::seconds(20));
  trainer.add_observer(&hold);
  const std::vector<double> losses = losses_of(trainer);
  CHECK(hold.data_starts() == 4);
  CHECK(hold.not_overlapped() == 0);
  // Holding the data op back changes nothing the model sees.
  TrainOptions served = o;
  served.prefetch = false;
  CHECK(losses == train(served).losses);
}

TEST_CASE("at a GPU the model reads the batch the copy of the run before brought",
          "[trainer][prefetch][device]") {
  dispatch::ScopedEmulatedDevices emulated(1);
  TrainOptions o = small_run(2);
  o.devices = {0};
  Trainer trainer(o);
  const Graph& g = trainer.training_graph();
  const Blob* on_device = g.blob("replica0::images_device");
  CHECK(on_device->location() == Location::gpu(0));
  CHECK(on_device->writers().empty());
  CHECK_FALSE(on_device->readers().empty());
  // The copy reads the host's current batch and writes the next one on the GPU.
  const Blob* host = g.blob("replica0::images");
  REQUIRE(host->readers().size() == 1);
  const Op* copy = host->readers()[0];
  CHECK(copy->thread() == "data");
  REQUIRE(copy->outputs().size() == 1);
  const Blob* arriving = copy->outputs()[0];
  CHECK(arriving->readers().empty());
  const auto& swaps = g.swaps();
  CHECK(std::find(swaps.begin(), swaps.end(),
                  std::pair<Blob*, Blob*>(const_cast<Blob*>(on_device),
                                          const_cast<Blob*>(arriving))) != swaps.end());
  CHECK(losses_of(trainer).size() == 2);
}

TEST_CASE("prefetched batches give the losses of batches served in their run, bit for bit",
          "[trainer][prefetch][determinism]") {
  struct Case {
    const char* name;
    void (*set)(TrainOptions&);
  };
  const Case cases[] = {
      {"one CPU location", [](TrainOptions&) {}},
      {"micro-batches", [](TrainOptions& o) { o.micro_batches = 2; }},
      {"replicas at two CPU locations",
       [](TrainOptions& o) {
         o.parallel = ParallelLayout::kData;
         o.locations = 2;
       }},
      {"a pipeline of two stages",
       [](TrainOptions& o) {
         o.model = "lenet";
         o.parallel = ParallelLayout::kPipeline;
         o.stages = 2;
         o.micro_batches = 2;
       }},
      {"a GPU", [](TrainOptions& o) { o.devices = {0}; }},
      {"a GPU with micro-batches",
       [](TrainOptions& o) {
         o.devices = {0};
         o.micro_batches = 2;
       }},
      {"two GPUs",
       [](TrainOptions& o) {
         o.parallel = ParallelLayout::kData;
         o.devices = {0, 1};
       }},
  };
  dispatch::ScopedEmulatedDevices emulated(2);
  for (const Case& c : cases) {
    INFO(c.name);
    TrainOptions o = small_run(6);
    c.set(o);
    TrainOptions served = o;
    served.prefetch = false;
    const Trajectory reference = train(served);
    const Trajectory prefetched = train(o);
    REQUIRE(prefetched.losses.size() == 6);
    CHECK(prefetched.losses == reference.losses);
    CHECK(prefetched.weights == reference.weights);
  }
}

TEST_CASE(
    "a run resumed from a checkpoint written during prefetching training follows the "
    "unbroken run",
    "[trainer][prefetch][e2e]") {
  dispatch::ScopedEmulatedDevices emulated(1);
  for (const bool gpu : {false, true}) {
    INFO((gpu ? "at a GPU" : "at the CPU"));
    testing::TempDir dir;
    TrainOptions o = small_run(10);
    o.micro_batches = 2;
    if (gpu) o.devices = {0};
    o.checkpoint_dir = dir.file("ckpts");
    o.checkpoint_every = 4;
    o.keep = 5;
    Trainer whole(o);
    const std::vector<double> expected = losses_of(whole);
    REQUIRE(expected.size() == 10);
    // The checkpoint of iteration 4 was saved while the data ops had served batches 5 (and, at
    // the GPU, 6) ahead: it keeps the batches trained on.
    TrainOptions resumed = o;
    resumed.checkpoint_dir = dir.file("resumed");
    resumed.resume_from = checkpoint_file(o.checkpoint_dir, 4);
    Trainer second(resumed);
    REQUIRE(second.resume() == resumed.resume_from);
    const std::vector<double> rest = losses_of(second);
    REQUIRE(rest.size() == 6);
    CHECK(rest == std::vector<double>(expected.begin() + 4, expected.end()));
  }
}
