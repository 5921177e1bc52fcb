#include <catch2/catch.hpp>

#include "operators/registry.hpp"
#include "tests/operators/gradient_test.hpp"

using namespace purine;
using namespace purine::testing;

TEST_CASE("bias adds one value per channel", "[bias]") {
  Tensor x = tensor_of({2, 3, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Tensor b = tensor_of({3}, {10, 20, 30});
  Tensor y = run_forward("bias", {}, {x, b})[0];
  REQUIRE(y.shape() == x.shape());
  std::vector<float> expected = {11, 12, 23, 24, 35, 36, 17, 18, 29, 30, 41, 42};
  for (int i = 0; i < 12; ++i) CHECK(y.data()[i] == expected[i]);

  Tensor x2 = tensor_of({2, 2}, {1, 2, 3, 4});
  Tensor y2 = run_forward("bias", {}, {x2, tensor_of({2}, {-1, 1})})[0];
  CHECK(y2.data()[0] == 0.0f);
  CHECK(y2.data()[1] == 3.0f);
  CHECK(y2.data()[2] == 2.0f);
  CHECK(y2.data()[3] == 5.0f);
}

TEST_CASE("bias on a large tensor takes the threaded path", "[bias]") {
  Rng rng(21);
  Tensor x = random_tensor({8, 16, 20, 20}, rng);
  Tensor b = random_tensor({16}, rng);
  Tensor y = run_forward("bias", {}, {x, b})[0];
  for (int64_t i = 0; i < x.count(); i += 37) {
    CHECK(y.data()[i] == x.data()[i] + b.data()[(i / 400) % 16]);
  }
}

TEST_CASE("bias_grad sums over every axis but the channels", "[bias]") {
  Tensor dy = tensor_of({2, 3, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Tensor db = run_forward("bias_grad", {}, {dy})[0];
  REQUIRE(db.shape() == Shape{3});
  CHECK(db.data()[0] == 1 + 2 + 7 + 8);
  CHECK(db.data()[1] == 3 + 4 + 9 + 10);
  CHECK(db.data()[2] == 5 + 6 + 11 + 12);

  Rng rng(22);
  Tensor big = random_tensor({5, 4, 37}, rng);
  Tensor sums = run_forward("bias_grad", {}, {big})[0];
  for (int c = 0; c < 4; ++c) {
    double expected = 0;
    for (int n = 0; n < 5; ++n) {
      for (int s = 0; s < 37; ++s) expected += big.data()[(n * 4 + c) * 37 + s];
    }
    CHECK(sums.data()[c] == Approx(expected).margin(1e-5));
  }
}

TEST_CASE("bias gradient aliases dy and passes the numeric check", "[bias]") {
  auto op = OperatorRegistry::create("bias");
  GradientSpec spec = op->gradient();
  REQUIRE(spec.aliases.size() == 1);
  CHECK(spec.aliases[0] == std::make_pair(0, 0));
  Rng rng(23);
  check_gradient("bias", {}, {random_tensor({2, 3, 2, 2}, rng), random_tensor({3}, rng)});
  check_gradient("bias", {}, {random_tensor({4, 5}, rng), random_tensor({5}, rng)});
}

TEST_CASE("bias rejects a bias of the wrong size", "[bias]") {
  Rng rng(24);
  REQUIRE_THROWS_WITH(
      run_forward("bias", {}, {random_tensor({2, 3, 4}, rng), random_tensor({4}, rng)}),
      Catch::Contains("input 1 (bias) has shape [4], expected [3]"));
  REQUIRE_THROWS_WITH(run_forward("bias_grad", {}, {random_tensor({3}, rng)}),
                      Catch::Contains("expected rank 2 or more"));
}
