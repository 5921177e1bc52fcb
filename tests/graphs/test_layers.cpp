// Layers as composites: each builds its ops and parameters, infers its top shapes, runs, and
// its gradients flow through autodiff.
#include <catch2/catch.hpp>

#include "graphs/initialize.hpp"
#include "graphs/layers.hpp"
#include "purine/autodiff.hpp"
#include "purine/dsl.hpp"
#include "purine/runnable.hpp"

using namespace purine;

namespace {

// Runs `layer` on a random input of `shape`, then backward of the sum-free softmax loss of its
// flattened top, and returns the top.
Blob* run_layer(Graph& g, Composite& layer, const Shape& shape) {
  Blob* x = g.add_blob("x", shape);
  Rng rng(4);
  for (int64_t i = 0; i < x->tensor().count(); ++i)
    x->tensor().mutable_data()[i] = rng.uniform(-1, 1);
  B{x} >> layer;
  Blob* top = layer.top(0);
  Blob* labels = g.add_blob("labels", {shape[0]});
  Blob* logits = g.apply("flat", "reshape",
                         Attrs().set("shape", std::vector<int64_t>{shape[0], -1}), {top})[0];
  Blob* loss = g.apply("xent", "softmax_cross_entropy", {}, {logits, labels}, {"loss", "p"})[0];
  std::vector<Blob*> wrt{x};
  for (const Parameter& p : g.parameters()) wrt.push_back(p.blob);
  Gradients grads = backward(g, loss, wrt);
  initialize_parameters(g, 1);
  Runnable run(g);
  run.run();
  for (Blob* b : wrt) {
    INFO(b->name());
    REQUIRE(grads.has(b));
    double norm = 0;
    for (int64_t i = 0; i < b->tensor().count(); ++i)
      norm += std::abs(grads.of(b)->tensor().data()[i]);
    REQUIRE(norm > 0);  // gradients reach every input and parameter
  }
  return top;
}

}  // namespace

TEST_CASE("conv layer: weight, bias and the output size", "[layers]") {
  Graph g;
  auto& conv = g.add<ConvLayer>("conv", ConvLayer::Options{4, 3, 2, 1});
  Blob* top = run_layer(g, conv, {2, 3, 7, 7});
  REQUIRE(top->shape() == Shape{2, 4, 4, 4});
  REQUIRE(g.blob("conv::weight")->shape() == Shape{4, 3, 3, 3});
  REQUIRE(g.blob("conv::bias")->shape() == Shape{4});
  REQUIRE(g.parameters().size() == 2);
  REQUIRE(g.parameters()[1].decay_mult == 0.0);  // no weight decay on biases
}

TEST_CASE("inner product layer flattens its input", "[layers]") {
  Graph g;
  auto& fc = g.add<InnerProductLayer>("fc", InnerProductLayer::Options{5});
  Blob* top = run_layer(g, fc, {3, 2, 2, 2});
  REQUIRE(top->shape() == Shape{3, 5});
  REQUIRE(g.blob("fc::weight")->shape() == Shape{5, 8});
}

TEST_CASE("pool, activation, LRN, dropout and batch norm layers", "[layers]") {
  {
    Graph g;
    auto& pool = g.add<PoolLayer>("pool", PoolLayer::Options{"avg", 2});
    REQUIRE(run_layer(g, pool, {2, 3, 6, 6})->shape() == Shape{2, 3, 3, 3});
  }
  {
    Graph g;
    auto& act = g.add<ActivationLayer>("act", "tanh");
    REQUIRE(run_layer(g, act, {2, 5})->shape() == Shape{2, 5});
  }
  {
    Graph g;
    auto& lrn = g.add<LrnLayer>("lrn", LrnLayer::Options{});
    REQUIRE(run_layer(g, lrn, {2, 6, 3, 3})->shape() == Shape{2, 6, 3, 3});
  }
  {
    Graph g;
    auto& drop = g.add<DropoutLayer>("drop", 0.3, true);
    REQUIRE(run_layer(g, drop, {4, 8})->shape() == Shape{4, 8});
  }
  {
    Graph g;
    auto& bn = g.add<BatchNormLayer>("bn", BatchNormLayer::Options{});
    REQUIRE(run_layer(g, bn, {4, 3, 2, 2})->shape() == Shape{4, 3, 2, 2});
    // Running statistics are state, swapped in after each training run.
    REQUIRE(g.states().size() == 2);
    REQUIRE(g.swaps().size() == 2);
  }
}

TEST_CASE("inception concatenates its four branches", "[layers]") {
  Graph g;
  auto& inception = g.add<InceptionLayer>("inc", InceptionLayer::Options{4, 3, 5, 2, 3, 2});
  Blob* top = run_layer(g, inception, {2, 6, 5, 5});
  REQUIRE(top->shape() == Shape{2, 4 + 5 + 3 + 2, 5, 5});
  REQUIRE(g.find_op("inc::concat::concat") != nullptr);
  REQUIRE(g.parameters().size() == 12);  // six convolutions, each with weight and bias
}

TEST_CASE("bad layer options and inputs are named", "[layers]") {
  Graph g;
  REQUIRE_THROWS_WITH(g.add<ConvLayer>("c", ConvLayer::Options{0}),
                      Catch::Contains("conv layer 'c'") && Catch::Contains("outputs=0"));
  REQUIRE_THROWS_WITH(g.add<PoolLayer>("p", PoolLayer::Options{"median"}),
                      Catch::Contains("pool layer 'p'") && Catch::Contains("median"));
  auto& conv = g.add<ConvLayer>("conv", ConvLayer::Options{2, 3});
  Blob* flat = g.add_blob("flat", {2, 3});
  B{flat} >> conv;
  REQUIRE_THROWS_WITH(
      conv.top(), Catch::Contains("conv layer 'conv'") && Catch::Contains("expected [N, C, H, W]"));
}

TEST_CASE("sum layer adds its bottoms, a residual block's input gets both gradients", "[layers]") {
  // y = x + fc(x): dL/dx = dL/dy + fc's input gradient, summed in a fixed order.
  Graph g;
  Blob* x = g.add_blob("x", {2, 3});
  auto& fc = g.add<InnerProductLayer>("fc", InnerProductLayer::Options{3});
  auto& sum = g.add<SumLayer>("residual");
  B{x} >> fc;
  B{x, fc.top(0)} >> sum;
  Blob* y = sum.top(0);
  REQUIRE(y->shape() == Shape{2, 3});
  // L = <r, y>, an inner product of the flattened y with r (a [1, 1] scalar): dL/dy = r.
  Blob* flat = g.apply("flat", "reshape", Attrs().set("shape", std::vector<int64_t>{1, 6}), {y})[0];
  Blob* loss = g.apply("loss", "inner_product", {}, {flat, g.add_blob("r", {1, 6})})[0];
  Gradients grads = backward(g, loss, {x});
  initialize_parameters(g, 3);
  const std::vector<float> xs{1, -2, 3, 0.5f, -1, 2}, rs{0.5f, 1, -1, 2, 0.25f, -0.75f};
  x->tensor().set_values(xs);
  g.blob("r")->tensor().set_values(rs);
  Runnable(g).run();
  // Forward: y = x + x W^T + b.
  const std::vector<float> w = g.blob("fc::weight")->tensor().values();
  const std::vector<float> b = g.blob("fc::bias")->tensor().values();
  const std::vector<float> got = y->tensor().values();
  for (int n = 0; n < 2; ++n)
    for (int o = 0; o < 3; ++o) {
      double expected = xs[n * 3 + o] + b[o];
      for (int i = 0; i < 3; ++i) expected += xs[n * 3 + i] * w[o * 3 + i];
      CHECK(got[n * 3 + o] == Approx(expected).margin(1e-5));
    }
  // Backward: dx = r + r W.
  const std::vector<float> dx = grads.of(x)->tensor().values();
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 3; ++i) {
      double expected = rs[n * 3 + i];
      for (int o = 0; o < 3; ++o) expected += rs[n * 3 + o] * w[o * 3 + i];
      CHECK(dx[n * 3 + i] == Approx(expected).margin(1e-5));
    }
  Graph bad;
  auto& lonely = bad.add<SumLayer>("lonely");
  B{bad.add_blob("a", {2})} >> lonely;
  CHECK_THROWS_WITH(lonely.top(), Catch::Contains("sum layer 'lonely': needs at least two"));
  auto& mismatched = bad.add<SumLayer>("mismatched");
  B{bad.add_blob("p", {2}), bad.add_blob("q", {3})} >> mismatched;
  CHECK_THROWS_WITH(mismatched.top(), Catch::Contains("bottom 'q' has shape") &&
                                          Catch::Contains("a sum needs one shape"));
}

TEST_CASE("flatten layer views each image as one row, and passes the gradient back", "[layers]") {
  Graph g;
  Blob* x = g.add_blob("x", {2, 3, 1, 2});
  auto& flatten = g.add<FlattenLayer>("logits");
  B{x} >> flatten;
  Blob* y = flatten.top(0);
  REQUIRE(y->shape() == Shape{2, 6});
  Blob* loss =
      g.apply("loss", "inner_product", {},
              {g.apply("row", "reshape", Attrs().set("shape", std::vector<int64_t>{1, 12}), {y})[0],
               g.add_blob("r", {1, 12})})[0];
  Gradients grads = backward(g, loss, {x});
  std::vector<float> xs(12), rs(12);
  for (int i = 0; i < 12; ++i) xs[i] = 0.5f * i - 2, rs[i] = 1.0f - 0.25f * i;
  x->tensor().set_values(xs);
  g.blob("r")->tensor().set_values(rs);
  Runnable(g).run();
  CHECK(y->tensor().values() == xs);
  CHECK(grads.of(x)->tensor().values() == rs);
}

namespace {

constexpr int64_t kChannels = 3;
constexpr int64_t kPerChannel = 8;  // N * H * W of a [2, 3, 2, 2] micro-batch

// Micro-batch m's input: its own scale and offset per channel, so that every micro-batch's
// statistics differ.
std::vector<float> micro_input(int m) {
  std::vector<float> values(kChannels * kPerChannel);
  Rng rng(20 + m);
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t channel = (static_cast<int64_t>(i) / 4) % kChannels;
    values[i] = static_cast<float>(rng.uniform(-1, 1) * (m + 1) + 0.5 * m - 0.25 * channel);
  }
  return values;
}

// A batch norm layer on `x` followed by a softmax loss on its flattened top, with the gradient of
// `x` built; returns {top, dx}.
std::pair<Blob*, Blob*> normalize(Graph& g, Blob* x, double momentum) {
  auto& bn = g.add<BatchNormLayer>("bn", BatchNormLayer::Options{1e-5, momentum, true});
  B{x} >> bn;
  Blob* top = bn.top(0);
  Blob* labels = g.add_blob("labels", {2});
  labels->tensor().set_values({0, 1});
  Blob* logits =
      g.apply("flat", "reshape", Attrs().set("shape", std::vector<int64_t>{2, -1}), {top})[0];
  Blob* loss = g.apply("xent", "softmax_cross_entropy", {}, {logits, labels}, {"loss", "p"})[0];
  return {top, backward(g, loss, {x}).of(x)};
}

}  // namespace

TEST_CASE(
    "batch norm under micro-batches: each normalizes by its own statistics, the running ones "
    "take one momentum update per micro-batch, in micro-batch order",
    "[layers][micro_batches]") {
  constexpr int kMicro = 3;
  constexpr double kMomentum = 0.8;
  const Shape shape{2, kChannels, 2, 2};
  // Copies sharing their parameters (and so their running statistics), as the trainer builds
  // micro-batches.
  Graph g;
  std::vector<std::pair<Blob*, Blob*>> micro;  // {top, dx}
  for (int m = 0; m < kMicro; ++m) {
    Graph::Scope scope(g, "micro" + std::to_string(m));
    g.share_parameters(g.scope_prefix(), "");
    Blob* x = g.add_blob("x", shape);
    x->tensor().set_values(micro_input(m));
    micro.push_back(normalize(g, x, kMomentum));
  }
  // One pair of running statistics, under the name a graph without micro-batches gives them
  // (checkpoints do not depend on the micro-batches), swapped with the last micro-batch's.
  REQUIRE(g.states().size() == 2);
  Blob* mean = g.blob("bn::running_mean");
  Blob* var = g.blob("bn::running_var");
  CHECK(g.states()[0].blob == mean);
  CHECK(g.swapped_with(mean) == g.blob("micro2::bn::new_running_mean"));
  CHECK(g.swapped_with(var) == g.blob("micro2::bn::new_running_var"));
  // Each update reads the one before: micro-batch 0 the statistics, m what m - 1 wrote.
  CHECK(g.op("micro0::bn::bn")->inputs()[3] == mean);
  CHECK(g.op("micro1::bn::bn")->inputs()[3] == g.blob("micro0::bn::new_running_mean"));
  CHECK(g.op("micro2::bn::bn")->inputs()[4] == g.blob("micro1::bn::new_running_var"));
  initialize_parameters(g, 1);
  Runnable(g).run();

  // Forward and backward of micro-batch m are those of batch norm on its input alone.
  for (int m = 0; m < kMicro; ++m) {
    INFO("micro-batch " << m);
    Graph alone;
    Blob* x = alone.add_blob("x", shape);
    x->tensor().set_values(micro_input(m));
    const auto [top, dx] = normalize(alone, x, kMomentum);
    initialize_parameters(alone, 1);
    Runnable(alone).run();
    CHECK(micro[m].first->tensor().values() == top->tensor().values());
    CHECK(micro[m].second->tensor().values() == dx->tensor().values());
  }

  // The running statistics by hand: mean 0 and variance 1, then per micro-batch m in order
  // r = momentum r + (1 - momentum) s, s its mean, or its variance with n / (n - 1).
  std::vector<double> want_mean(kChannels, 0.0), want_var(kChannels, 1.0);
  for (int m = 0; m < kMicro; ++m) {
    const std::vector<float> x = micro_input(m);
    for (int64_t c = 0; c < kChannels; ++c) {
      std::vector<double> values;
      for (int64_t n = 0; n < 2; ++n)
        for (int64_t i = 0; i < 4; ++i) values.push_back(x[(n * kChannels + c) * 4 + i]);
      double sum = 0, squares = 0;
      for (double v : values) sum += v;
      const double mu = sum / kPerChannel;
      for (double v : values) squares += (v - mu) * (v - mu);
      want_mean[c] = kMomentum * want_mean[c] + (1 - kMomentum) * mu;
      want_var[c] = kMomentum * want_var[c] + (1 - kMomentum) * squares / (kPerChannel - 1);
    }
  }
  const std::vector<float> got_mean = mean->tensor().values(), got_var = var->tensor().values();
  for (int64_t c = 0; c < kChannels; ++c) {
    INFO("channel " << c);
    CHECK(got_mean[c] == Approx(want_mean[c]).margin(1e-6));
    CHECK(got_var[c] == Approx(want_var[c]).epsilon(1e-5));
  }
  // The values themselves, for this input (printed once from the computation above).
  const std::vector<double> literal_mean{0.20715, 0.334377, -0.185752};
  const std::vector<double> literal_var{1.30978, 1.27078, 1.65114};
  for (int64_t c = 0; c < kChannels; ++c) {
    CHECK(got_mean[c] == Approx(literal_mean[c]).margin(2e-6));
    CHECK(got_var[c] == Approx(literal_var[c]).margin(2e-5));
  }
  // A state added by hand under a shared scope would be one per copy: refused, naming the way.
  Graph::Scope scope(g, "micro3");
  g.share_parameters(g.scope_prefix(), "");
  Blob* own = g.add_blob("count", {1});
  REQUIRE_THROWS_WITH(g.add_state({own, "fill_constant", {}, 0.0}),
                      Catch::Contains("state 'micro3::count' is under scope 'micro3'") &&
                          Catch::Contains("Composite::make_state"));
}
