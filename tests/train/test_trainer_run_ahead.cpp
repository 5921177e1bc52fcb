// TrainOptions::run_ahead (RunOptions::run_ahead, purine/internal/device_graphs.hpp): with CUDA
// graphs, each replay is launched while the one before may still run on the device, and
// training gives the losses, progress reports and weights of replays that wait for each other,
// bit for bit, within the device runtime's steady-state budget; the state line says how many
// launches overlapped. On emulated devices (dispatcher/emulated_devices.hpp), whose queues run
// the CPU kernels on their own threads, so a replay takes long enough to overlap the next launch,
// and on a real GPU where one is at hand.
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "base/device_runtime.hpp"
#include "base/error.hpp"
#include "dispatcher/emulated_devices.hpp"
#include "operators/cuda/gpu_test.hpp"
#include "train/trainer.hpp"

using namespace purine;

namespace {

TrainOptions small_run(const std::string& model, Optimizer optimizer, bool run_ahead) {
  TrainOptions o;
  o.model = model;
  o.data_dir = "synthetic:1x28x28:10";
  o.batch = 16;
  o.max_iters = 9;
  o.lr = 0.01;
  o.optimizer = optimizer;
  o.threads = 1;
  o.seed = 7;
  o.evaluate = false;
  o.devices = {0};
  o.run_ahead = run_ahead;
  return o;
}

struct Outcome {
  TrainResult result;
  std::vector<int64_t> iterations;  // as reported, in order
  std::vector<double> losses;
  std::vector<double> learning_rates;
  std::vector<std::vector<float>> weights;
  DeviceCounters after_warm_up, at_end;
};

Outcome train(const TrainOptions& o) {
  Outcome out;
  Trainer trainer(o);
  out.result = trainer.train([&](const TrainProgress& p) {
    out.iterations.push_back(p.iteration);
    out.losses.push_back(p.loss);
    out.learning_rates.push_back(p.learning_rate);
    if (p.iteration == 4) out.after_warm_up = device_runtime()->counters();
  });
  out.at_end = device_runtime()->counters();
  for (const Parameter& p : trainer.training_graph().parameters())
    out.weights.push_back(p.blob->tensor().values());
  return out;
}

// `overlaps`: some launch must find the replay before still running (a model whose device work
// outlasts the host's between two launches: the data op, the trainer's checks).
void check_ahead_like_in_step(const TrainOptions& options, bool overlaps) {
  INFO(options.model);
  TrainOptions o = options;
  const Outcome ahead = train(o);
  o.run_ahead = false;
  const Outcome in_step = train(o);
  REQUIRE(in_step.iterations.size() == 9);
  CHECK(ahead.iterations == in_step.iterations);  // each once, in order, the last one included
  CHECK(ahead.losses == in_step.losses);
  CHECK(ahead.learning_rates == in_step.learning_rates);
  CHECK((ahead.weights == in_step.weights));  // (not expanded: 100,000s of floats)
  CHECK(ahead.result.final_loss == in_step.result.final_loss);
  // Iterations 5 to 9 replay two recordings; the first replay of each layout follows a drain
  // for its recording, and the others overlapped the replay before them.
  const std::string state = ahead.result.device_graphs;
  INFO(state);
  CHECK(ahead.result.replayed_iterations == 7);
  const std::string marker = ", run ahead: ";
  const size_t at = state.find(marker);
  REQUIRE(at != std::string::npos);
  const int overlapped = std::stoi(state.substr(at + marker.size()));
  if (overlaps) CHECK(overlapped >= 1);
  CHECK(overlapped <= 5);
  CHECK(in_step.result.device_graphs.find("run ahead") == std::string::npos);
  // Running ahead waits for the device by its events alone.
  CHECK(ahead.at_end.synchronizations == ahead.after_warm_up.synchronizations);
  CHECK(ahead.at_end.device_to_host_bytes == ahead.after_warm_up.device_to_host_bytes);
  CHECK(ahead.at_end.allocations == ahead.after_warm_up.allocations);
}

}  // namespace

TEST_CASE("running ahead at an emulated GPU trains as replays that wait for each other",
          "[trainer][device][graph]") {
  dispatch::ScopedEmulatedDevices emulated(1);
  check_ahead_like_in_step(small_run("mlp", Optimizer::kSgd, true), false);
  check_ahead_like_in_step(small_run("convnet_bn", Optimizer::kAdam, true), true);
  TrainOptions decayed = small_run("mlp", Optimizer::kSgd, true);
  decayed.lr_policy = LrPolicy::kStep;  // a learning rate that changes with every iteration
  decayed.lr_step = 1;
  decayed.lr_gamma = 0.5;
  check_ahead_like_in_step(decayed, false);
}

TEST_CASE("running ahead evaluates during training as training in step does",
          "[trainer][device][graph]") {
  dispatch::ScopedEmulatedDevices emulated(1);
  TrainOptions o = small_run("mlp", Optimizer::kSgd, true);
  o.evaluate = true;
  o.test_every = 3;
  o.test_samples = 200;
  const Outcome ahead = train(o);
  o.run_ahead = false;
  const Outcome in_step = train(o);
  REQUIRE(in_step.result.evaluations.size() == 2);  // after 3 and 6; 9 is the end's
  CHECK(ahead.result.evaluations == in_step.result.evaluations);
  CHECK(ahead.result.test_accuracy == in_step.result.test_accuracy);
  CHECK(ahead.losses == in_step.losses);
  CHECK((ahead.weights == in_step.weights));
}

TEST_CASE("running ahead on a real GPU trains as replays that wait for each other",
          "[trainer][gpu][graph]") {
  PURINE_REQUIRE_GPU();
  // A GPU runs these small batches faster than the host serves them: overlap is not asked.
  check_ahead_like_in_step(small_run("mlp", Optimizer::kSgd, true), false);
  check_ahead_like_in_step(small_run("convnet_bn", Optimizer::kAdam, true), false);
}

TEST_CASE("a divergence found one run late names its own iteration and leaves no checkpoint",
          "[trainer][device][graph]") {
  dispatch::ScopedEmulatedDevices emulated(1);
  TrainOptions o = small_run("mlp", Optimizer::kSgd, true);
  // From iteration 6, a replayed one, the learning rate is infinite as a float.
  o.lr_policy = LrPolicy::kStep;
  o.lr_step = 5;
  o.lr_gamma = 1e45;
  std::string message[2];
  for (bool ahead : {false, true}) {
    o.run_ahead = ahead;
    try {
      train(o);
    } catch (const Error& e) {
      message[ahead] = e.what();
    }
  }
  INFO(message[0]);
  INFO(message[1]);
  REQUIRE(message[0].find("training diverged at iteration 6: ") == 0);
  // The same iteration as in step (the blame names what the run after left, so it may differ).
  CHECK(message[1].substr(0, message[1].find(':')) == message[0].substr(0, message[0].find(':')));
}

TEST_CASE("running ahead is off, with the reason, while traced", "[trainer][device][graph]") {
  // An observer would see no device times (tests/train/test_options.cpp: the layouts refused).
  dispatch::ScopedEmulatedDevices emulated(1);
  TrainOptions o = small_run("mlp", Optimizer::kSgd, true);
  o.trace_path = "run_ahead_trace.json";
  const Outcome traced = train(o);
  CHECK(traced.result.device_graphs.find(", run ahead off: observed (traced)") !=
        std::string::npos);
  std::remove(o.trace_path.c_str());
}
