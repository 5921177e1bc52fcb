#include <catch2/catch.hpp>
#include <cmath>

#include "operators/registry.hpp"
#include "tests/operators/gradient_test.hpp"
#include "tests/same_bits.hpp"

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

// Tagged [isa]: the sums of small planes run in blocks of 16, 8 and 4 channels under AVX-512,
// AVX2 and the baseline (ctest reruns [isa] under each cap), and each must give these bits.
TEST_CASE("bias_grad sums every plane in the same order whatever the plane size",
          "[bias][determinism][isa]") {
  // The order: per plane eight interleaved partial sums (pixel q into q % 8) added in order,
  // then the planes in image order, each from +0.
  auto expected = [](const Tensor& dy) {
    const int64_t n = dy.shape()[0], c = dy.shape()[1], inner = dy.shape().count_from(2);
    std::vector<float> db(c);
    for (int64_t j = 0; j < c; ++j) {
      float total = 0;
      for (int64_t i = 0; i < n; ++i) {
        float partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int64_t q = 0; q < inner; ++q) partial[q % 8] += dy.data()[(i * c + j) * inner + q];
        float plane = 0;
        for (float p : partial) plane += p;
        total += plane;
      }
      db[j] = total;
    }
    return db;
  };
  Rng rng(23);
  // Planes of 2 to 100 pixels (the small ones by blocks of channels, 64 and up to 100 channel
  // by channel), channel counts that fill whole blocks of 16 and leave remainders, and a
  // tensor large enough to be threaded.
  for (const Shape& shape :
       {Shape{3, 5, 2}, Shape{2, 17, 3}, Shape{4, 40, 2, 2}, Shape{5, 16, 7}, Shape{2, 9, 3, 3},
        Shape{3, 33, 4, 4}, Shape{2, 7, 7, 7}, Shape{2, 20, 8, 8}, Shape{2, 6, 65},
        Shape{2, 5, 10, 10}, Shape{64, 96, 2, 2}}) {
    INFO("dy " << shape);
    Tensor dy = random_tensor(shape, rng);
    // Large magnitudes apart, so that another order of the adds rounds differently.
    for (int64_t i = 0; i < dy.count(); i += 3) dy.mutable_data()[i] *= 1e4f;
    const Tensor db = run_forward("bias_grad", {}, {dy})[0];
    const std::vector<float> want = expected(dy);
    for (int64_t j = 0; j < shape[1]; ++j) {
      INFO("channel " << j);
      CHECK(db.data()[j] == want[j]);
    }
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

TEST_CASE("bias_relu gives bias then relu bit for bit, threaded or not", "[bias]") {
  Rng rng(25);
  for (const Shape& shape : {Shape{6, 5}, Shape{8, 16, 20, 20}, Shape{3, 4, 7}}) {
    INFO("x " << shape);
    const Tensor x = random_tensor(shape, rng), b = random_tensor({shape[1]}, rng);
    const Tensor fused = run_forward("bias_relu", {}, {x, b})[0];
    const Tensor unfused = run_forward("relu", {}, {run_forward("bias", {}, {x, b})[0]})[0];
    REQUIRE(fused.shape() == shape);
    int64_t zeros = 0;
    for (int64_t i = 0; i < x.count(); ++i) {
      REQUIRE(fused.data()[i] == unfused.data()[i]);
      zeros += fused.data()[i] == 0.0f;
    }
    CHECK(zeros > 0);  // both sides of the ReLU were exercised
    CHECK(zeros < x.count());
  }
  REQUIRE_THROWS_WITH(
      run_forward("bias_relu", {}, {random_tensor({2, 3}, rng), random_tensor({2}, rng)}),
      Catch::Contains("bias_relu: input 1 (bias) has shape [2], expected [3]"));
}

// Tagged [isa]: small planes take one pass in blocks of 16, 8 or 4 channels by the ISA.
TEST_CASE("bias_relu_grad gives relu_grad then bias_grad bit for bit, threaded or not",
          "[bias][isa]") {
  Rng rng(27);
  // Rows, large planes, and small ones (one pass over blocks of channels: with remainders, and
  // threaded at GoogLeNet-28's 2x2).
  for (const Shape& shape : {Shape{6, 5}, Shape{8, 16, 20, 20}, Shape{3, 4, 7}, Shape{0, 3},
                             Shape{5, 19, 3, 3}, Shape{2, 33, 8, 8}, Shape{64, 40, 2, 2}}) {
    INFO("y " << shape);
    Tensor y = random_tensor(shape, rng);
    const Tensor dy = random_tensor(shape, rng);
    // Values at the ReLU's edge: -0, NaN and infinities pass no gradient but +infinity's.
    const float edges[] = {-0.0f, std::nanf(""), INFINITY, -INFINITY};
    for (int64_t i = 0; i < y.count(); i += 5) y.mutable_data()[i] = edges[i / 5 % 4];
    const std::vector<Tensor> fused = run_forward("bias_relu_grad", {}, {y, dy});
    const Tensor dx = run_forward("relu_grad", {}, {y, dy})[0];
    const Tensor db = run_forward("bias_grad", {}, {dx})[0];
    REQUIRE(fused.size() == 2);
    REQUIRE(fused[0].shape() == shape);
    REQUIRE(fused[1].shape() == Shape{shape[1]});
    CHECK(fused[0].values() == dx.values());
    CHECK(fused[1].values() == db.values());
  }
  REQUIRE_THROWS_WITH(
      run_forward("bias_relu_grad", {}, {random_tensor({2, 3}, rng), random_tensor({3, 2}, rng)}),
      Catch::Contains("bias_relu_grad: input 1 (dy) has shape [3,2], expected input 0's"));
}

TEST_CASE("bias_relu's gradient is one bias_relu_grad op and passes the numeric check", "[bias]") {
  const GradientSpec spec = OperatorRegistry::create("bias_relu")->gradient();
  REQUIRE(spec.ops.size() == 1);
  CHECK(spec.ops[0].type == "bias_relu_grad");
  Rng rng(26);
  // x + b kept at least 0.1 from the ReLU's kink, where a numeric derivative is meaningless.
  auto away_from_zero = [&](const Shape& shape) {
    Tensor x = random_tensor(shape, rng, 0.15f, 1.0f);
    for (int64_t i = 0; i < x.count(); i += 2) x.mutable_data()[i] = -x.data()[i];
    return x;
  };
  const auto small_bias = [&](int64_t c) { return random_tensor({c}, rng, -0.05f, 0.05f); };
  check_gradient("bias_relu", {}, {away_from_zero({2, 3, 2, 2}), small_bias(3)});
  check_gradient("bias_relu", {}, {away_from_zero({4, 5}), small_bias(5)});
}

TEST_CASE("bias gradients in channel blocks give the plain kernels' bits", "[bias][isa]") {
  Rng rng(23);
  // Planes of one pixel, small planes (the plain kernel's vector path) and large ones.
  for (const Shape& shape : {Shape{5, 32, 1, 1}, Shape{4, 16, 3, 3}, Shape{3, 32, 9, 11}}) {
    const Tensor y = random_tensor(shape, rng), dy = random_tensor(shape, rng);
    for (int block : {8, 16}) {
      INFO(shape << " in blocks of " << block);
      int blocked = 0;
      const auto plain = run_forward("bias_relu_grad", {}, {y, dy});
      const auto got = run_forward_blocked("bias_relu_grad", {}, {y, dy}, block, &blocked);
      CHECK(blocked == 3);  // y, dy and dx
      CHECK(same_bits(got[0], plain[0]));
      CHECK(same_bits(got[1], plain[1]));
      const Tensor db = run_forward("bias_grad", {}, {dy})[0];
      CHECK(same_bits(run_forward_blocked("bias_grad", {}, {dy}, block, &blocked)[0], db));
      CHECK(blocked == 1);
    }
  }
}
