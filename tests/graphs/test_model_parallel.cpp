// Layers split over locations (graphs/model_parallel.hpp, LinearLayer in graphs/layers.hpp).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "graphs/initialize.hpp"
#include "graphs/layers.hpp"
#include "graphs/model_parallel.hpp"
#include "purine/autodiff.hpp"
#include "purine/dsl.hpp"
#include "purine/runnable.hpp"
#include "purine/serialize.hpp"
#include "temp_dir.hpp"

using purine::testing::TempDir;

using namespace purine;

namespace {

const Location kHome = Location::cpu(0, 0);

// Builds a model on `x` at the graph's current location; returns its logits.
using ModelCode = std::function<Blob*(Graph&, Blob*)>;

Blob* mlp(Graph& g, Blob* x) {
  return (B{x} >> g.add<InnerProductLayer>("fc1", InnerProductLayer::Options{9}) >>
          g.add<ActivationLayer>("relu", "relu") >>
          g.add<InnerProductLayer>("fc2", InnerProductLayer::Options{4}))
      .top(0);
}

Blob* convnet(Graph& g, Blob* x) {
  return (B{x} >> g.add<ConvLayer>("conv1", ConvLayer::Options{6, 3, 1, 1}) >>
          g.add<ActivationLayer>("relu1", "relu") >>
          g.add<PoolLayer>("pool", PoolLayer::Options{"max", 2}) >>
          g.add<ConvLayer>("conv2", ConvLayer::Options{5, 3, 1, 1}) >>
          g.add<ActivationLayer>("relu2", "relu") >>
          g.add<InnerProductLayer>("fc", InnerProductLayer::Options{4}))
      .top(0);
}

// A model with its loss, initialized from `seed`, fed fixed inputs, and the gradients of its
// parameters and input built (not run).
struct Net {
  Graph g{"net"};
  Blob* x = nullptr;
  Blob* loss = nullptr;
  Gradients grads;
  Net(const ModelCode& model, const Shape& input, const std::function<void(Graph&)>& layout,
      uint64_t seed = 1) {
    layout(g);
    Graph::Placement at(g, kHome);
    x = g.add_blob("x", input);
    Blob* labels = g.add_blob("labels", {input[0]});
    auto& xent = g.add<SoftmaxLossLayer>("loss");
    B{model(g, x), labels} >> xent;
    loss = xent.top(0);
    std::vector<Blob*> wrt = {x};
    for (const Parameter& p : g.parameters()) wrt.push_back(p.blob);
    grads = backward(g, loss, wrt);
    initialize_parameters(g, seed, 0);
    Rng rng(7);
    float* v = x->tensor().mutable_data();
    for (int64_t i = 0; i < x->tensor().count(); ++i) v[i] = rng.uniform(-1, 1);
    float* l = labels->tensor().mutable_data();
    for (int64_t i = 0; i < input[0]; ++i) l[i] = static_cast<float>(i % 4);
  }
  void run() { Runnable(g, RunOptions{dispatch::Mode::kParallel}).run(); }
  // Every parameter (or, with `gradient`, its gradient) as the single-device tensor, by name.
  std::map<std::string, std::vector<float>> tensors(bool gradient) const {
    std::map<std::string, std::vector<float>> out;
    for (StoredTensor t : whole_blobs(g)) {
      if (gradient)
        for (TensorPiece& piece : t.saved_from) piece.blob = grads.of(piece.blob);
      out[t.name] = stored_values(t);
    }
    return out;
  }
};

void no_split(Graph&) {}

// The largest difference between two tensors relative to the largest magnitude of `expected`.
double relative_difference(const std::vector<float>& got, const std::vector<float>& expected) {
  REQUIRE(got.size() == expected.size());
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, std::fabs(double(got[i]) - expected[i]));
    scale = std::max(scale, std::fabs(double(expected[i])));
  }
  return diff / scale;
}

// The split net computes the unsplit one's loss and gradients: sums over split inputs add
// partial results in another order, so within 1e-6 relative rather than bit for bit.
void check_follows_unsplit(const ModelCode& model, const Shape& input,
                           const std::function<void(Graph&)>& layout) {
  Net whole(model, input, no_split);
  Net split(model, input, layout);
  whole.run();
  split.run();
  CHECK(split.tensors(false) == whole.tensors(false));  // the same initial weights
  CHECK(std::fabs(split.loss->tensor().values()[0] - whole.loss->tensor().values()[0]) <=
        1e-6 * std::fabs(whole.loss->tensor().values()[0]));
  const auto expected = whole.tensors(true);
  const auto got = split.tensors(true);
  REQUIRE(got.size() == expected.size());
  for (const auto& [name, values] : expected) {
    INFO(name);
    CHECK(relative_difference(got.at(name), values) <= 1e-6);
  }
  INFO("the input's gradient");
  CHECK(relative_difference(split.grads.of(split.x)->tensor().values(),
                            whole.grads.of(whole.x)->tensor().values()) <= 1e-6);
}

const std::vector<Location> kTwo = {Location::cpu(0, 0), Location::cpu(0, 1)};
const std::vector<Location> kThree = {Location::cpu(0, 1), Location::cpu(0, 2),
                                      Location::cpu(0, 3)};

}  // namespace

TEST_CASE("an MLP split column-then-row follows the unsplit MLP", "[model_parallel]") {
  check_follows_unsplit(mlp, {5, 7}, [](Graph& g) { model_parallel(g, {"fc1", "fc2"}, kTwo); });
  // Three locations, none of them the layers' own; 9 and 4 do not divide by 3.
  check_follows_unsplit(mlp, {5, 7}, [](Graph& g) { model_parallel(g, {"fc1", "fc2"}, kThree); });
  // Each axis alone: the joins and cuts then happen at the layers' location.
  check_follows_unsplit(mlp, {5, 7}, [](Graph& g) { g.split("fc2", {kTwo, SplitAxis::kOutputs}); });
  check_follows_unsplit(mlp, {5, 7}, [](Graph& g) {
    g.split("fc1", {kThree, SplitAxis::kInputs});
  });
}

TEST_CASE("convolutions split by output and input channels follow the unsplit net",
          "[model_parallel]") {
  check_follows_unsplit(convnet, {2, 3, 6, 6}, [](Graph& g) {
    model_parallel(g, {"conv1", "conv2"}, kThree);
  });
  check_follows_unsplit(convnet, {2, 3, 6, 6}, [](Graph& g) {
    g.split("conv1", {kTwo, SplitAxis::kInputs});
    g.split("conv2", {kTwo, SplitAxis::kOutputs});
    g.split("fc", {kTwo, SplitAxis::kInputs});  // by the channels of conv2's joined output
  });
}

TEST_CASE("layers split by batch, and the one-weird-trick hybrid, follow the unsplit net",
          "[model_parallel]") {
  check_follows_unsplit(mlp, {5, 7}, [](Graph& g) {
    model_parallel(g, {"fc1:batch", "fc2:batch"}, kThree);
  });
  const auto trick = [](Graph& g) {
    model_parallel(g, {"conv1:batch", "conv2:batch", "fc:outputs"}, kTwo);
  };
  check_follows_unsplit(convnet, {4, 3, 6, 6}, trick);
  // The convolutions' weights travel to the second location (their gradients come back); the
  // fully connected layer's weight pieces stay where they are, its input travels instead.
  Net net(convnet, {4, 3, 6, 6}, trick);
  std::set<std::string> moved;
  for (const auto& op : net.g.ops())
    if (op->type() == "copy") moved.insert(op->inputs()[0]->name());
  CHECK(moved.count("conv1::weight"));
  CHECK(moved.count("conv2::weight"));
  for (const std::string& name : moved) {
    INFO(name);
    CHECK_FALSE((name.rfind("fc::", 0) == 0 && name.find("weight") != std::string::npos));
  }
  CHECK_THROWS_WITH(model_parallel(net.g, {"fc:rows"}, kTwo),
                    Catch::Contains("'fc:rows': the axis must be outputs, inputs or batch"));
}

TEST_CASE("layers between split ones work on the slices where they are", "[model_parallel]") {
  Net net(convnet, {2, 3, 6, 6}, [](Graph& g) { model_parallel(g, {"conv1", "conv2"}, kTwo); });
  for (const char* name : {"relu1::part1::relu::out0", "pool::part1::pool::out0"}) {
    INFO(name);
    CHECK(net.g.blob(name)->location() == Location::cpu(0, 1));
    CHECK(net.g.blob(name)->shape()[1] == 3);  // half of conv1's 6 channels
  }
  for (const auto& op : net.g.ops()) CHECK(op->type() != "concat");  // no slice was joined
}

TEST_CASE("the Megatron pattern: the hidden slices never move, one sum per pass",
          "[model_parallel]") {
  Net net(mlp, {5, 7}, [](Graph& g) { model_parallel(g, {"fc1", "fc2"}, kTwo); });
  int concats = 0, sums = 0, copies = 0;
  for (const auto& op : net.g.ops()) {
    concats += op->type() == "concat";
    sums += op->type() == "sum";
    copies += op->type() == "copy";
  }
  // Forward: x to cpu1, fc2's partial result back; backward: the loss gradient to cpu1, x's
  // gradient back. The hidden layer's slices stay where they were computed.
  CHECK(concats == 0);
  CHECK(sums == 2);  // fc2's partial results, and x's gradient from both locations
  CHECK(copies == 4);
  CHECK(net.g.blob("fc1::part1::weight")->location() == Location::cpu(0, 1));
  CHECK(net.g.blob("fc1::part1::weight")->shape() == Shape{4, 7});  // 9 outputs: 5 + 4
  CHECK(net.g.blob("fc2::part1::weight")->shape() == Shape{4, 4});
  CHECK(net.g.blob("relu::part1::relu::out0")->location() == Location::cpu(0, 1));
  CHECK(net.g.find_blob("fc2::bias") != nullptr);  // added once, after the sum
}

TEST_CASE("checkpoints of a split model hold single-device tensors", "[model_parallel]") {
  TempDir dir;
  const std::string path = dir.file("split.ckpt");
  Net split(
      mlp, {5, 7},
      [](Graph& g) {
        model_parallel(g, {"fc1", "fc2"}, kThree);
      },
      11);
  save_checkpoint(split.g, path, {});
  Net whole(mlp, {5, 7}, no_split, 12);
  CHECK(whole.tensors(false) != split.tensors(false));
  load_checkpoint(whole.g, path);
  CHECK(whole.tensors(false) == split.tensors(false));
  // And back: a split model loads an unsplit checkpoint.
  Net other(
      mlp, {5, 7},
      [](Graph& g) {
        model_parallel(g, {"fc1", "fc2"}, kTwo);
      },
      13);
  save_checkpoint(whole.g, path, {});
  load_checkpoint(other.g, path);
  CHECK(other.tensors(false) == split.tensors(false));
}

TEST_CASE("a split larger than the layer is refused, naming the layer", "[model_parallel]") {
  const std::vector<Location> five = {Location::cpu(0, 0), Location::cpu(0, 1), Location::cpu(0, 2),
                                      Location::cpu(0, 3), Location::cpu(0, 4)};
  REQUIRE_THROWS_WITH(Net(mlp, {5, 7}, [&](Graph& g) { model_parallel(g, {"fc2"}, five); }),
                      Catch::Contains("layer 'fc2': split over 5 locations, but it has 4 "
                                      "outputs; split it over at most 4"));
  REQUIRE_THROWS_WITH(Net(mlp, {5, 3},
                          [&](Graph& g) {
                            g.split("fc1", {five, SplitAxis::kInputs});
                          }),
                      Catch::Contains("layer 'fc1': split over 5 locations, but it has 3 inputs"));
  Graph g;
  CHECK_THROWS_WITH(model_parallel(g, {}, kTwo), Catch::Contains("no layers to split"));
  CHECK_THROWS_WITH(model_parallel(g, {"fc1"}, {kHome, kHome}),
                    Catch::Contains("layer 'fc1': a location is listed twice"));
}

TEST_CASE("a split entry's layer may carry its scope before the axis", "[model_parallel]") {
  CHECK(split_layer_name("conv1") == "conv1");
  CHECK(split_layer_name("conv1:batch") == "conv1");
  CHECK(split_layer_name("convnet::conv2") == "convnet::conv2");
  CHECK(split_layer_name("convnet::conv2:inputs") == "convnet::conv2");
  CHECK(split_layer_name("a::b::c:outputs") == "a::b::c");
  Graph g;
  CHECK_THROWS_WITH(
      model_parallel(g, {"convnet::conv2:sideways"}, kTwo),
      Catch::Contains("'convnet::conv2:sideways': the axis must be outputs, inputs or "
                      "batch"));
}
