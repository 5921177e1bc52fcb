#include <omp.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "operators/compute_threads.hpp"
#include "operators/registry.hpp"
#include "tests/operators/gradient_test.hpp"

using namespace purine;
using namespace purine::testing;

TEST_CASE("sgd_update without momentum steps against the gradient", "[sgd_update]") {
  Tensor w = tensor_of({2}, {1.0f, -2.0f});
  Tensor g = tensor_of({2}, {0.5f, 4.0f});
  Tensor h({2});
  Tensor lr = tensor_of({}, {0.25f});
  std::vector<Tensor> out = run_forward("sgd_update", {}, {w, g, h, lr});
  CHECK(out[1].data()[0] == Approx(0.125));
  CHECK(out[1].data()[1] == Approx(1.0));
  CHECK(out[0].data()[0] == Approx(0.875));
  CHECK(out[0].data()[1] == Approx(-3.0));
}

TEST_CASE("sgd_update with momentum and weight decay over three steps", "[sgd_update]") {
  // By hand, momentum 0.9, weight_decay 0.1, lr 0.5, a constant gradient 1, w0 = 2, h0 = 0:
  //   h1 = 0.5 * (1 + 0.2) = 0.6                     w1 = 1.4
  //   h2 = 0.54 + 0.5 * (1 + 0.14) = 1.11            w2 = 0.29
  //   h3 = 0.999 + 0.5 * (1 + 0.029) = 1.5135        w3 = -1.2235
  Attrs attrs = Attrs().set("momentum", 0.9).set("weight_decay", 0.1);
  auto op = OperatorRegistry::create("sgd_update", attrs);
  Tensor w = tensor_of({1}, {2.0f});
  Tensor g = tensor_of({1}, {1.0f});
  Tensor h({1});
  Tensor lr = tensor_of({}, {0.5f});
  OpContext context;
  const double expected_h[] = {0.6, 1.11, 1.5135};
  const double expected_w[] = {1.4, 0.29, -1.2235};
  for (int step = 0; step < 3; ++step) {
    // In place, as the training loop does it.
    op->compute({&w, &g, &h, &lr}, {&w, &h}, context);
    CHECK(h.data()[0] == Approx(expected_h[step]));
    CHECK(w.data()[0] == Approx(expected_w[step]));
  }
}

TEST_CASE("sgd_update on a large tensor takes the threaded path", "[sgd_update]") {
  Rng rng(8);
  Tensor w = random_tensor({300, 300}, rng);
  Tensor g = random_tensor({300, 300}, rng);
  Tensor h = random_tensor({300, 300}, rng);
  Tensor lr = tensor_of({}, {0.1f});
  std::vector<Tensor> out = run_forward("sgd_update", Attrs().set("momentum", 0.5), {w, g, h, lr});
  for (int64_t i = 0; i < w.count(); i += 777) {
    const float hi = 0.5f * h.data()[i] + 0.1f * g.data()[i];
    CHECK(out[1].data()[i] == Approx(hi));
    CHECK(out[0].data()[i] == Approx(w.data()[i] - hi));
  }
}

TEST_CASE("sgd_update rejects bad shapes and attributes", "[sgd_update]") {
  Tensor w({2, 3});
  REQUIRE_THROWS_WITH(run_forward("sgd_update", {}, {w, Tensor({3, 2}), w, Tensor(Shape{})}),
                      Catch::Contains("input 1 (grad) has shape [3,2]"));
  REQUIRE_THROWS_WITH(run_forward("sgd_update", {}, {w, w, w, Tensor({1})}),
                      Catch::Contains("input 3 (lr) has shape [1]; expected a scalar"));
  REQUIRE_THROWS_WITH(OperatorRegistry::create("sgd_update", Attrs().set("momentum", -0.5)),
                      Catch::Contains("'momentum' is -0.5"));
  CHECK_FALSE(OperatorRegistry::create("sgd_update")->differentiable());
}

TEST_CASE("sgd_update of several weights updates each as alone, bit for bit", "[sgd_update]") {
  Rng rng(9);
  const Attrs attrs = Attrs().set("momentum", 0.9).set("weight_decay", 5e-4);
  const Tensor lr = tensor_of({}, {0.05f});
  std::vector<Tensor> inputs;
  for (const Shape& shape : {Shape{3, 4}, Shape{300, 300}, Shape{0}, Shape{7}})
    for (int role = 0; role < 3; ++role) inputs.push_back(random_tensor(shape, rng));
  inputs.push_back(lr);
  const std::vector<Tensor> together = run_forward("sgd_update", attrs, inputs);
  REQUIRE(together.size() == 8);
  for (size_t k = 0; k < 4; ++k) {
    INFO("weight " << k);
    const std::vector<Tensor> alone =
        run_forward("sgd_update", attrs, {inputs[3 * k], inputs[3 * k + 1], inputs[3 * k + 2], lr});
    CHECK(together[2 * k].values() == alone[0].values());
    CHECK(together[2 * k + 1].values() == alone[1].values());
  }
  REQUIRE_THROWS_WITH(run_forward("sgd_update", attrs, {inputs[0], inputs[1], inputs[2]}),
                      Catch::Contains("3 inputs; expected (weight, grad, history) for each"));
  REQUIRE_THROWS_WITH(
      run_forward("sgd_update", attrs,
                  {inputs[0], inputs[1], inputs[2], inputs[3], inputs[4], inputs[0], lr}),
      Catch::Contains("input 5 (history of weight 1) has shape [3,4], expected input 3's"));
}

// Weights of a million floats or more take the streaming-store path: the same floats as the
// formula, element by element, whatever the thread count and the odd tail.
TEST_CASE("sgd_update of a large weight writes the formula's floats on any thread count",
          "[sgd_update]") {
  Rng rng(10);
  const int64_t n = (int64_t{1} << 20) + 13;
  const Tensor w = random_tensor({n}, rng), g = random_tensor({n}, rng),
               h = random_tensor({n}, rng);
  const float lr = 0.05f, momentum = 0.9f, decay = 5e-4f;
  const Attrs attrs = Attrs().set("momentum", 0.9).set("weight_decay", 5e-4);
  std::vector<float> expected_w(n), expected_h(n);
  for (int64_t i = 0; i < n; ++i) {
    const float wi = w.data()[i];
    expected_h[i] = momentum * h.data()[i] + lr * (g.data()[i] + decay * wi);
    expected_w[i] = wi - expected_h[i];
  }
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    INFO(threads << " threads");
    set_compute_threads(threads);
    const std::vector<Tensor> out =
        run_forward("sgd_update", attrs, {w, g, h, tensor_of({}, {lr})});
    CHECK((out[0].values() == expected_w));
    CHECK((out[1].values() == expected_h));
  }
  set_compute_threads(saved);
}

// count_non_finite (the trainer's divergence check): the number of NaN and infinite new weights,
// counted on every path of the loop (whole fours and the tail, threaded, streamed), with the
// weights of the op without it, bit for bit.
TEST_CASE("sgd_update with count_non_finite counts its non-finite new weights on every path",
          "[sgd_update]") {
  Rng rng(11);
  const Attrs plain = Attrs().set("momentum", 0.9).set("weight_decay", 5e-4);
  Attrs counting = plain;
  counting.set("count_non_finite", 1);
  const Tensor lr = tensor_of({}, {0.05f});
  for (const int64_t n : {int64_t{11}, int64_t{300 * 300 + 3}, (int64_t{1} << 20) + 13}) {
    INFO(n << " weights");
    Tensor w = random_tensor({n}, rng), g = random_tensor({n}, rng), h = random_tensor({n}, rng);
    g.mutable_data()[0] = NAN;    // in the first four
    w.mutable_data()[2] = 3e38f;  // finite inputs whose step overflows
    h.mutable_data()[2] = -3.4e38f;
    g.mutable_data()[n / 2 + 1] = INFINITY;  // in the middle
    h.mutable_data()[n - 1] = -INFINITY;     // in the tail
    const std::vector<Tensor> counted = run_forward("sgd_update", counting, {w, g, h, lr});
    const std::vector<Tensor> alone = run_forward("sgd_update", plain, {w, g, h, lr});
    REQUIRE(counted.size() == 3);
    CHECK(counted[2].shape() == Shape{});
    CHECK(counted[2].data()[0] == 4.0f);
    int64_t expected = 0;
    for (int64_t i = 0; i < n; ++i) expected += !std::isfinite(alone[0].data()[i]);
    CHECK(expected == 4);
    for (int k = 0; k < 2; ++k)
      CHECK(std::memcmp(counted[k].data(), alone[k].data(), sizeof(float) * n) == 0);
  }
  CHECK_THROWS_WITH(OperatorRegistry::create("sgd_update", Attrs().set("count_non_finite", 2)),
                    Catch::Contains("count_non_finite must be 0 or 1, got 2"));
}
