// TrainOptions::fuse (graphs/fusion.hpp): the training graph's conv + bias + relu chains become
// conv_bias_relu ops (batch norm + relu batch_norm_relu ops, a residual sum + relu sum_relu
// ops, whose gradients take in the sums of the gradients gathered into them), and training follows
// the unfused graph's losses and weights bit for bit, alone, data parallel and with micro-batches;
// the parameters keep their names (checkpoints). With fuse_siblings, the convolutions that read one
// input become one op, and training follows the unfused graph within rounding.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "dispatcher/emulated_devices.hpp"
#include "operators/cuda/gpu_test.hpp"
#include "train/trainer.hpp"

using namespace purine;

namespace {

TrainOptions small_run(const std::string& model, int iterations) {
  TrainOptions o;
  o.model = model;
  o.data_dir = "synthetic:1x28x28:10";
  o.batch = 8;
  o.max_iters = iterations;
  o.lr = 0.05;
  o.threads = 2;
  o.seed = 3;
  o.evaluate = false;
  return o;
}

struct Outcome {
  std::vector<double> losses;
  std::vector<std::string> parameter_names;
  std::vector<std::vector<float>> weights;
  int fused_ops = 0;
  int fan_ins = 0;  // relu_grad ops that add the parts of their dy
  int update_ops = 0;
};

Outcome train(TrainOptions o, bool fuse) {
  o.fuse = fuse;
  Outcome out;
  Trainer trainer(o);
  trainer.train([&](const TrainProgress& p) { out.losses.push_back(p.loss); });
  for (const auto& op : trainer.training_graph().ops()) {
    out.fused_ops += op->type() == "conv_bias_relu" || op->type() == "bias_relu" ||
                     op->type() == "batch_norm_relu" || op->type() == "inner_product_bias" ||
                     op->type() == "sum_relu";
    out.fan_ins += op->type() == "relu_grad" && op->inputs().size() > 2;
    out.update_ops += op->type() == "sgd_update" || op->type() == "adam_update";
  }
  for (const Parameter& p : trainer.training_graph().parameters()) {
    out.parameter_names.push_back(p.blob->name());
    out.weights.push_back(p.blob->tensor().values());
  }
  return out;
}

void check_fused_like_unfused(const TrainOptions& o, int expected_fusions,
                              int expected_fan_ins = 0) {
  const Outcome fused = train(o, true), plain = train(o, false);
  CHECK(fused.fused_ops == expected_fusions);
  CHECK(fused.fan_ins == expected_fan_ins);
  CHECK(plain.fused_ops == 0);
  CHECK(plain.fan_ins == 0);
  REQUIRE(fused.losses.size() == static_cast<size_t>(o.max_iters));
  CHECK(fused.losses == plain.losses);
  CHECK(fused.parameter_names == plain.parameter_names);
  CHECK(fused.weights == plain.weights);
}

}  // namespace

TEST_CASE("fused training follows unfused training bit for bit", "[trainer][fusion][determinism]") {
  SECTION("convnet: conv1 and conv2, and fc1's bias and relu3") {
    check_fused_like_unfused(small_run("convnet", 4), 3);
  }
  SECTION("mlp: the biases and ReLUs of fc1 and fc2") {
    check_fused_like_unfused(small_run("mlp", 4), 2);
  }
  SECTION("googlenet_small: its stem and every inception branch, siblings apart") {
    // 2 stem convolutions and 6 in each of 9 inception modules.
    TrainOptions o = small_run("googlenet_small", 2);
    o.fuse_siblings = false;
    check_fused_like_unfused(o, 2 + 9 * 6);
  }
  SECTION("convnet_bn: bn1 and bn2 with their relus, and fc1's bias and relu3") {
    check_fused_like_unfused(small_run("convnet_bn", 2), 3);
  }
  SECTION(
      "resnet20: the stem's and every block's first batch norm with their relus, and every "
      "block's residual sum with its relu") {
    // A block's second batch norm feeds the residual sum, which its relu is fused with; every
    // block's output but the last's feeds the next block's branch and shortcut, whose gradients
    // the relu's gradient adds.
    check_fused_like_unfused(small_run("resnet20", 2), 1 + 9 + 9, 8);
  }
  SECTION("resnet20 with 2 micro-batches, the fan-ins fused before the schedule orders them") {
    TrainOptions o = small_run("resnet20", 2);
    o.micro_batches = 2;
    check_fused_like_unfused(o, 2 * (1 + 9 + 9), 2 * 8);
  }
  SECTION("convnet data parallel over 2 locations, every replica fused") {
    TrainOptions o = small_run("convnet", 3);
    o.parallel = ParallelLayout::kData;
    o.locations = 2;
    o.threads = 1;
    check_fused_like_unfused(o, 2 * 3);
  }
  SECTION("convnet with 2 micro-batches sharing the weights") {
    TrainOptions o = small_run("convnet", 3);
    o.micro_batches = 2;
    check_fused_like_unfused(o, 2 * 3);
  }
}

TEST_CASE("googlenet_small trains with its sibling convolutions fused close to unfused",
          "[trainer][fusion]") {
  // Each inception module's 1x1, 3x3_reduce and 5x5_reduce read its input: one op of 3, with
  // a concat of their weights and biases each and a split of the output (graphs/fusion.hpp).
  TrainOptions o = small_run("googlenet_small", 3);
  o.lr = 0.002;  // at 0.05 its loss grows to 1e3, where any rounding is amplified
  Outcome fused = train(o, true), plain = train(o, false);
  CHECK(fused.fused_ops == 2 + 9 * (6 - 3 + 1));
  CHECK(fused.parameter_names == plain.parameter_names);
  // Its early steps amplify rounding: the third loss moves by 1.4e-4 (3.40726 to 3.40678),
  // as much as the unfused run's does under ONEDNN_MAX_CPU_ISA=AVX2 (to 3.40678 too).
  REQUIRE(fused.losses.size() == plain.losses.size());
  for (size_t i = 0; i < plain.losses.size(); ++i)
    CHECK(fused.losses[i] == Approx(plain.losses[i]).epsilon(1e-3));
  REQUIRE(fused.weights.size() == plain.weights.size());
  double largest_change = 0;
  for (size_t p = 0; p < plain.weights.size(); ++p)
    for (size_t i = 0; i < plain.weights[p].size(); ++i)
      largest_change =
          std::max<double>(largest_change, std::abs(fused.weights[p][i] - plain.weights[p][i]));
  CHECK(largest_change > 0);     // the modules' input gradients sum in another order
  CHECK(largest_change < 2e-4);  // 3.3e-5 measured
}

TEST_CASE("fused training on a GPU follows unfused training", "[trainer][fusion][gpu]") {
  PURINE_REQUIRE_GPU();
  TrainOptions o = small_run("convnet", 5);
  o.devices = {0};
  o.math = GpuMath::kExact;
  const Outcome fused = train(o, true), plain = train(o, false);
  CHECK(fused.fused_ops == 4);  // conv1, conv2; fc1 and fc2 with their biases (fc1's ReLU too)
  REQUIRE(fused.losses.size() == plain.losses.size());
  // cuDNN's fused forward may sum in another order than its plain forward: a float rounding
  // apart at first, which training may grow a little.
  for (size_t i = 0; i < plain.losses.size(); ++i) {
    INFO("iteration " << i + 1);
    CHECK(fused.losses[i] == Approx(plain.losses[i]).epsilon(1e-4));
  }
}

TEST_CASE("at a GPU the training graph's updates are one op per set of attributes",
          "[trainer][fusion]") {
  // Built, not run: no GPU needed.
  auto updates = [](const std::string& model, bool fuse, Optimizer optimizer = Optimizer::kSgd) {
    TrainOptions o = small_run(model, 1);
    o.devices = {0};
    o.fuse = fuse;
    o.optimizer = optimizer;
    const std::unique_ptr<Graph> g = build_training_graph(o);
    std::vector<size_t> weights;  // per update op
    for (const auto& op : g->ops()) {
      if (op->type() == "sgd_update") weights.push_back(op->inputs().size() / 3);
      if (op->type() == "adam_update") weights.push_back(op->inputs().size() / 4);
    }
    return weights;
  };
  // The weights (decayed) and the biases (no decay).
  CHECK(updates("mlp", true) == std::vector<size_t>{3, 3});
  CHECK(updates("mlp", false).size() == 6);
  CHECK(updates("mlp", true, Optimizer::kAdam) == std::vector<size_t>{3, 3});
  CHECK(updates("mlp", false, Optimizer::kAdamW).size() == 6);
  const std::vector<size_t> googlenet = updates("googlenet", true);
  REQUIRE(googlenet.size() == 2);
  CHECK(googlenet[0] + googlenet[1] == updates("googlenet", false).size());
  CHECK(googlenet[0] + googlenet[1] > 100);
  // On the CPU every update stays its own op.
  TrainOptions cpu = small_run("mlp", 1);
  const std::unique_ptr<Graph> g = build_training_graph(cpu);
  int on_cpu = 0;
  for (const auto& op : g->ops()) on_cpu += op->type() == "sgd_update";
  CHECK(on_cpu == 6);
}

TEST_CASE(
    "at an emulated GPU, fused products and SGD, Adam and AdamW updates train as unfused ones",
    "[trainer][fusion][device][determinism]") {
  dispatch::ScopedEmulatedDevices emulated(1);
  for (Optimizer optimizer : {Optimizer::kSgd, Optimizer::kAdam, Optimizer::kAdamW}) {
    INFO("optimizer " << static_cast<int>(optimizer));
    TrainOptions o = small_run("mlp", 4);
    o.devices = {0};
    o.threads = 1;
    o.optimizer = optimizer;
    o.lr = optimizer == Optimizer::kSgd ? 0.05 : 0.002;
    const Outcome fused = train(o, true), plain = train(o, false);
    CHECK(fused.fused_ops == 3);  // fc1, fc2 and fc3 as inner_product_bias
    CHECK(plain.fused_ops == 0);
    CHECK(fused.update_ops == 2);  // the weights (decayed) and the biases (no decay)
    CHECK(plain.update_ops == 6);
    REQUIRE(fused.losses.size() == 4);
    CHECK(fused.losses == plain.losses);
    CHECK(fused.losses.back() != fused.losses.front());
    CHECK(fused.weights == plain.weights);
  }
}
