// Autodiff on the bi-graph, checked against finite differences of the whole graph's loss.
#include <catch2/catch.hpp>
#include <cmath>

#include "purine/autodiff.hpp"
#include "purine/dsl.hpp"
#include "purine/runnable.hpp"

using namespace purine;

namespace {

void randomize(Blob* b, Rng& rng) {
  float* p = b->tensor().mutable_data();
  for (int64_t i = 0; i < b->tensor().count(); ++i) p[i] = rng.uniform(-1, 1);
}

// x -> fc1 -> h; s = sum(tanh(h), h) (h fans out to two readers); fc2(s) -> logits;
// loss = softmax_cross_entropy(logits, labels).
struct FanInNet {
  Graph g{"fanin"};
  Blob *x, *w1, *w2, *labels, *loss;
  FanInNet() {
    x = g.add_blob("x", {3, 4});
    w1 = g.add_blob("w1", {5, 4});
    w2 = g.add_blob("w2", {2, 5});
    labels = g.add_blob("labels", {3});
    Blob* h = g.apply("fc1", "inner_product", {}, {x, w1})[0];
    Blob* t = g.apply("tanh", "tanh", {}, {h})[0];
    Blob* s = g.apply("sum", "sum", {}, {t, h})[0];
    Blob* logits = g.apply("fc2", "inner_product", {}, {s, w2})[0];
    loss = g.apply("xent", "softmax_cross_entropy", {}, {logits, labels}, {"loss", "probs"})[0];
  }
};

}  // namespace

TEST_CASE("backward gradients match finite differences through fan-in", "[autodiff]") {
  FanInNet net;
  Gradients grads = backward(net.g, net.loss, {net.w1, net.w2, net.x});
  // Fan-in of h gives an explicit, named sum.
  REQUIRE(net.g.find_op("fc1::out0::grad_sum") != nullptr);
  Rng rng(3);
  for (Blob* b : {net.x, net.w1, net.w2}) randomize(b, rng);
  float* labels = net.labels->tensor().mutable_data();
  labels[0] = 0, labels[1] = 1, labels[2] = 1;
  Runnable run(net.g, RunOptions{dispatch::Mode::kSerial});
  run.run();
  for (Blob* wrt : {net.w1, net.w2, net.x}) {
    Tensor analytic = Tensor(wrt->shape());
    analytic.copy_from(grads.of(wrt)->tensor());
    for (int64_t k = 0; k < wrt->tensor().count(); ++k) {
      float* p = wrt->tensor().mutable_data() + k;
      const float saved = *p;
      const float h = 1e-3f;
      *p = saved + h;
      run.run();
      double plus = *net.loss->tensor().data();
      *p = saved - h;
      run.run();
      double minus = *net.loss->tensor().data();
      *p = saved;
      double numeric = (plus - minus) / (2 * h);
      INFO(wrt->name() << "[" << k << "]");
      REQUIRE(analytic.data()[k] == Approx(numeric).margin(2e-3));
    }
  }
}

TEST_CASE("backward only builds what the requested gradients need", "[autodiff]") {
  FanInNet net;
  size_t before = net.g.ops().size();
  Gradients grads = backward(net.g, net.loss, {net.w2});
  REQUIRE(grads.has(net.w2));
  REQUIRE_FALSE(grads.has(net.w1));
  // Only the seed, the loss gradient and fc2's weight gradient.
  REQUIRE(net.g.ops().size() - before == 3);
  REQUIRE_THROWS_WITH(grads.of(net.w1), Catch::Contains("no gradient for blob 'w1'"));
}

TEST_CASE("backward of a non-scalar loss is an error", "[autodiff]") {
  FanInNet net;
  REQUIRE_THROWS_WITH(backward(net.g, net.x, {net.w1}),
                      Catch::Contains("loss 'x' must be a scalar"));
}

TEST_CASE("backward through a non-differentiable op names it", "[autodiff]") {
  Graph g;
  Blob* scores = g.add_blob("scores", {2, 3});
  Blob* labels = g.add_blob("labels", {2});
  Blob* acc = g.apply("acc", "accuracy", {}, {scores, labels})[0];
  REQUIRE_THROWS_WITH(backward(g, acc, {scores}),
                      Catch::Contains("op 'acc' (accuracy) has no gradient"));
}

TEST_CASE("backward crosses locations: copies' gradients go back, fan-in sums at home",
          "[autodiff]") {
  // The fan-in net with tanh at cpu1 and the rest of the net after it at cpu2: h is read at two
  // other locations, so its gradient has two parts, each copied back to cpu0 and summed there.
  auto build = [](Graph& g, bool spread) {
    const Location home = Location::cpu(0, 0);
    const Location second = spread ? Location::cpu(0, 1) : home;
    const Location third = spread ? Location::cpu(0, 2) : home;
    Blob* x = g.add_blob("x", {3, 4});
    Blob* w1 = g.add_blob("w1", {5, 4});
    Blob* h = g.apply("fc1", "inner_product", {}, {x, w1})[0];
    Blob* t;
    {
      Graph::Placement at(g, second);
      t = g.apply("tanh", "tanh", {}, {h})[0];
    }
    Graph::Placement at(g, third);
    Blob* w2 = g.add_blob("w2", {2, 5});
    Blob* labels = g.add_blob("labels", {3});
    Blob* s = g.apply("sum", "sum", {}, {t, h})[0];
    Blob* logits = g.apply("fc2", "inner_product", {}, {s, w2})[0];
    Blob* loss =
        g.apply("xent", "softmax_cross_entropy", {}, {logits, labels}, {"loss", "probs"})[0];
    Gradients grads = backward(g, loss, {x, w1, w2});
    Rng rng(5);
    for (Blob* b : {x, w1, w2}) randomize(b, rng);
    float* l = labels->tensor().mutable_data();
    l[0] = 0, l[1] = 1, l[2] = 1;
    Runnable(g, RunOptions{dispatch::Mode::kParallel}).run();
    std::vector<std::vector<float>> values;
    for (Blob* b : {x, w1, w2}) {
      CHECK(grads.of(b)->location() == b->location());
      values.push_back(grads.of(b)->tensor().values());
    }
    return values;
  };
  Graph one, three;
  const auto expected = build(one, false);
  const auto got = build(three, true);
  CHECK(got == expected);  // bit for bit: two-part sums add in either order alike
  // The gradient of h reached home by copies and was summed at cpu0.
  const Op* sum = three.find_op("fc1::out0::grad_sum");
  REQUIRE(sum != nullptr);
  CHECK(sum->location() == Location::cpu(0, 0));
  for (const Blob* part : sum->inputs()) {
    CHECK(part->location() == Location::cpu(0, 0));
    REQUIRE(part->writers().size() == 1);
    CHECK(part->writers()[0]->type() == "copy");
  }
}
