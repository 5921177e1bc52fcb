// CUDA graphs (TrainOptions::cuda_graph, RunOptions::device_graphs): after two iterations
// launched op by op, a GPU replica's iterations replay two recordings (the weights and batches
// alternate between two buffers), with the losses and weights of a run without them, bit for bit,
// and within the steady-state budget of the device runtime; layouts a recording cannot replay
// faithfully are refused with the reason, and train as before; dropout draws new masks at every
// replay, as launched op by op. On emulated devices (dispatcher/emulated_devices.hpp), and on a
// real GPU where one is at hand.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "base/device_runtime.hpp"
#include "dispatcher/emulated_devices.hpp"
#include "graphs/layers.hpp"
#include "models/models.hpp"
#include "operators/cuda/gpu_test.hpp"
#include "purine/dsl.hpp"
#include "train/trainer.hpp"

using namespace purine;

namespace {

// mlp with dropout after its hidden layer: masks drawn at every iteration.
Blob* mlp_dropout(Graph& g, Blob* images, const ModelSpec& spec) {
  Graph::Scope scope(g, "mlp_dropout");
  return (B{images} >> g.add<InnerProductLayer>("fc1", InnerProductLayer::Options{64}) >>
          g.add<ActivationLayer>("relu1", "relu") >>
          g.add<DropoutLayer>("drop1", 0.5, spec.training) >>
          g.add<InnerProductLayer>("fc2", InnerProductLayer::Options{spec.classes}))
      .top(0);
}
PURINE_REGISTER_MODEL("test_mlp_dropout", mlp_dropout);

TrainOptions small_run(const std::string& model, Optimizer optimizer, bool cuda_graph) {
  TrainOptions o;
  o.model = model;
  o.data_dir = "synthetic:1x28x28:10";
  o.batch = 16;
  o.max_iters = 7;
  o.lr = 0.01;
  o.optimizer = optimizer;
  o.threads = 1;
  o.seed = 5;
  o.evaluate = false;
  o.devices = {0};
  o.cuda_graph = cuda_graph;
  return o;
}

struct Outcome {
  TrainResult result;
  std::vector<double> losses;
  std::vector<std::vector<float>> weights;
  DeviceCounters after_warm_up, at_end;
  int gpu_ops = 0;  // ops of the training graph at the GPU, and copies from it
};

Outcome train(const TrainOptions& o) {
  Outcome out;
  Trainer trainer(o);
  out.result = trainer.train([&](const TrainProgress& p) {
    out.losses.push_back(p.loss);
    if (p.iteration == 3) out.after_warm_up = device_runtime()->counters();
  });
  out.at_end = device_runtime()->counters();
  for (const auto& op : trainer.training_graph().ops()) {
    bool at_gpu = !op->location().is_cpu();
    for (const Blob* b : op->inputs()) at_gpu |= op->type() == "copy" && !b->location().is_cpu();
    out.gpu_ops += at_gpu;
  }
  for (const Parameter& p : trainer.training_graph().parameters())
    out.weights.push_back(p.blob->tensor().values());
  return out;
}

// Replayed and launched op by op, the same training; iterations 3 to 7 replay (1 and 2 make the
// lazy choices, 3 and 4 record one layout each).
void check_replays_like_op_by_op(const std::string& model, Optimizer optimizer, bool emulated,
                                 bool prefetch = true) {
  INFO(model << (prefetch ? "" : ", without prefetching"));
  TrainOptions o = small_run(model, optimizer, true);
  o.prefetch = prefetch;
  const Outcome replayed = train(o);
  o.cuda_graph = false;
  const Outcome op_by_op = train(o);
  // An emulated device runs one call per op: with prefetching, every op at the GPU and every
  // copy from it (which its queue runs); without, the recording holds only what waits for no
  // host task (the rest follows the run's data op, outside it). A real GPU's recording counts
  // its kernel, copy and memset nodes: several for some ops (and cuDNN's and cuBLAS's own),
  // none for a view's.
  const std::string state = replayed.result.device_graphs;
  const std::string prefix = "on: 2 recordings of ";
  REQUIRE(state.rfind(prefix, 0) == 0);
  const int operations = std::stoi(state.substr(prefix.size()));
  CHECK(state.substr(state.find(" device operations")) == " device operations, 5 replayed runs");
  if (!prefetch) {
    CHECK(operations < replayed.gpu_ops / 4);
  } else if (emulated) {
    CHECK(operations == replayed.gpu_ops);
  } else {
    CHECK(operations > 0);
  }
  CHECK(replayed.result.replayed_iterations == 5);
  CHECK(op_by_op.result.replayed_iterations == 0);
  CHECK(replayed.losses == op_by_op.losses);
  CHECK(replayed.weights == op_by_op.weights);
  // After the recordings, nothing waits for the device, reads it or allocates.
  CHECK(replayed.at_end.synchronizations == replayed.after_warm_up.synchronizations);
  CHECK(replayed.at_end.device_to_host_bytes == replayed.after_warm_up.device_to_host_bytes);
  CHECK(replayed.at_end.allocations == replayed.after_warm_up.allocations);
}

}  // namespace

TEST_CASE("replayed iterations at an emulated GPU train as iterations launched op by op",
          "[trainer][device][graph]") {
  dispatch::ScopedEmulatedDevices emulated(2);
  check_replays_like_op_by_op("mlp", Optimizer::kSgd, true);
  check_replays_like_op_by_op("convnet_bn", Optimizer::kAdam, true);
  // residual sums and their gradients
  check_replays_like_op_by_op("resnet20", Optimizer::kSgd, true);
  check_replays_like_op_by_op("mlp", Optimizer::kSgd, true, false);
  check_replays_like_op_by_op("test_mlp_dropout", Optimizer::kSgd, true);
}

TEST_CASE("CUDA graphs are refused, with the reason, where a recording cannot replay",
          "[trainer][device][graph]") {
  dispatch::ScopedEmulatedDevices emulated(2);
  SECTION("not asked") {
    const Outcome o = train(small_run("mlp", Optimizer::kSgd, false));
    CHECK(o.result.device_graphs == "off (not asked)");
  }
  SECTION("two GPUs") {
    TrainOptions o = small_run("mlp", Optimizer::kSgd, true);
    o.devices = {0, 1};
    o.parallel = ParallelLayout::kData;
    const Outcome two = train(o);
    CHECK(two.result.device_graphs == "off: rank 0's ops are at 2 GPUs");
    CHECK(two.result.replayed_iterations == 0);
  }
  SECTION("on the CPU") {
    TrainOptions o = small_run("mlp", Optimizer::kSgd, true);
    o.devices.clear();
    CHECK(train(o).result.device_graphs == "off: rank 0 has no op at a GPU location");
  }
}

TEST_CASE("replayed iterations on a real GPU train as iterations launched op by op",
          "[trainer][gpu][graph]") {
  PURINE_REQUIRE_GPU();
  check_replays_like_op_by_op("mlp", Optimizer::kSgd, false);
  check_replays_like_op_by_op("convnet_bn", Optimizer::kAdam, false);
  check_replays_like_op_by_op("resnet20", Optimizer::kSgd, false);
  check_replays_like_op_by_op("test_mlp_dropout", Optimizer::kSgd, false);
}
