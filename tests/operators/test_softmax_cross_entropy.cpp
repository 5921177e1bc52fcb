#include <catch2/catch.hpp>
#include <cmath>

#include "tests/operators/gradient_test.hpp"

using namespace purine;
using namespace purine::testing;

TEST_CASE("softmax_cross_entropy gives the mean negative log-likelihood",
          "[softmax_cross_entropy]") {
  Tensor logits = tensor_of({2, 3}, {1.0f, 2.0f, 3.0f, 0.5f, -1.0f, 0.0f});
  Tensor labels = tensor_of({2}, {0.0f, 2.0f});
  std::vector<Tensor> out = run_forward("softmax_cross_entropy", {}, {logits, labels});
  REQUIRE(out[0].shape() == Shape{});
  REQUIRE(out[1].shape() == Shape{2, 3});
  const double z0 = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  const double z1 = std::exp(0.5) + std::exp(-1.0) + std::exp(0.0);
  const double loss = (-std::log(std::exp(1.0) / z0) - std::log(std::exp(0.0) / z1)) / 2;
  CHECK(out[0].data()[0] == Approx(loss));
  CHECK(out[1].data()[2] == Approx(std::exp(3.0) / z0));
  CHECK(out[1].data()[3] == Approx(std::exp(0.5) / z1));
}

TEST_CASE("softmax_cross_entropy stays finite when a probability underflows",
          "[softmax_cross_entropy]") {
  Tensor logits = tensor_of({1, 2}, {1000.0f, 0.0f});
  Tensor labels = tensor_of({1}, {1.0f});
  std::vector<Tensor> out = run_forward("softmax_cross_entropy", {}, {logits, labels});
  CHECK(out[0].data()[0] == Approx(1000.0));
  CHECK(out[1].data()[0] == 1.0f);
  CHECK(out[1].data()[1] == 0.0f);
}

TEST_CASE("softmax_cross_entropy_grad is dloss * (probs - onehot) / N", "[softmax_cross_entropy]") {
  Tensor probs = tensor_of({2, 2}, {0.25f, 0.75f, 0.5f, 0.5f});
  Tensor labels = tensor_of({2}, {1.0f, 0.0f});
  Tensor dloss = tensor_of({}, {2.0f});
  Tensor d = run_forward("softmax_cross_entropy_grad", {}, {probs, labels, dloss})[0];
  CHECK(d.data()[0] == Approx(0.25));
  CHECK(d.data()[1] == Approx(-0.25));
  CHECK(d.data()[2] == Approx(-0.5));
  CHECK(d.data()[3] == Approx(0.5));
}

TEST_CASE("softmax_cross_entropy gradient passes the numeric check", "[softmax_cross_entropy]") {
  Rng rng(13);
  Tensor labels = tensor_of({4}, {0.0f, 4.0f, 2.0f, 2.0f});
  GradientCheckOptions options;
  options.loss_outputs = {0};
  check_gradient("softmax_cross_entropy", {}, {random_tensor({4, 5}, rng, -2, 2), labels}, options);
}

TEST_CASE("softmax_cross_entropy rejects labels outside the classes", "[softmax_cross_entropy]") {
  Tensor logits({2, 3});
  REQUIRE_THROWS_WITH(
      run_forward("softmax_cross_entropy", {}, {logits, tensor_of({2}, {0.0f, 3.0f})}),
      Catch::Contains("label of row 1 is 3") && Catch::Contains("[0, 3)"));
  REQUIRE_THROWS_WITH(
      run_forward("softmax_cross_entropy", {}, {logits, tensor_of({2}, {-1.0f, 0.0f})}),
      Catch::Contains("label of row 0 is -1"));
  REQUIRE_THROWS_WITH(
      run_forward("softmax_cross_entropy", {}, {logits, tensor_of({2}, {1.5f, 0.0f})}),
      Catch::Contains("label of row 0 is 1.5"));
}

TEST_CASE("softmax_cross_entropy rejects bad shapes", "[softmax_cross_entropy]") {
  REQUIRE_THROWS_WITH(
      run_forward("softmax_cross_entropy", {}, {Tensor({2, 3}), Tensor({3})}),
      Catch::Contains("input 1 (labels) has shape [3]") && Catch::Contains("expected [2]"));
  REQUIRE_THROWS_WITH(run_forward("softmax_cross_entropy", {}, {Tensor({2, 3, 4}), Tensor({2})}),
                      Catch::Contains("input 0 (logits) has shape [2,3,4]"));
}
