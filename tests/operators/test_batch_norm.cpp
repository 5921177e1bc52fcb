#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "operators/registry.hpp"
#include "tests/operators/gradient_test.hpp"
#include "tests/operators/lane_order.hpp"
#include "tests/same_bits.hpp"

using namespace purine;
using namespace purine::testing;

TEST_CASE("batch_norm train normalizes with batch statistics", "[batch_norm]") {
  // Channel 0 holds 1, 3, 5, 7 (mean 4, variance 5); channel 1 holds 2, 2, 2, 2.
  Tensor x = tensor_of({2, 2, 2}, {1, 3, 2, 2, 5, 7, 2, 2});
  Tensor gamma = tensor_of({2}, {2, 1});
  Tensor beta = tensor_of({2}, {0.5f, -1});
  Tensor running_mean = tensor_of({2}, {1, 1});
  Tensor running_var = tensor_of({2}, {1, 1});
  auto out = run_forward("batch_norm", Attrs().set("eps", 0.0).set("momentum", 0.9),
                         {x, gamma, beta, running_mean, running_var});
  REQUIRE(out.size() == 5);
  const double inv_std = 1 / std::sqrt(5.0);
  CHECK(out[0].data()[0] == Approx(2 * (1 - 4) * inv_std + 0.5));
  CHECK(out[0].data()[1] == Approx(2 * (3 - 4) * inv_std + 0.5));
  CHECK(out[0].data()[4] == Approx(2 * (5 - 4) * inv_std + 0.5));
  CHECK(out[0].data()[5] == Approx(2 * (7 - 4) * inv_std + 0.5));
  CHECK(out[1].data()[0] == 4.0f);
  CHECK(out[2].data()[0] == Approx(inv_std));
  CHECK(out[3].data()[0] == Approx(0.9 * 1 + 0.1 * 4));
  CHECK(out[4].data()[0] == Approx(0.9 * 1 + 0.1 * 20.0 / 3));  // unbiased: 20 / (4 - 1)
  CHECK(out[3].data()[1] == Approx(0.9 * 1 + 0.1 * 2));
  CHECK(out[4].data()[1] == Approx(0.9 * 1));

  // A constant channel normalizes to beta (eps keeps inv_std finite).
  auto eps = run_forward("batch_norm", {}, {x, gamma, beta, running_mean, running_var});
  CHECK(eps[0].data()[2] == -1.0f);
  CHECK(eps[2].data()[1] == Approx(1 / std::sqrt(1e-5)));
}

TEST_CASE("batch_norm test mode uses the running statistics", "[batch_norm]") {
  Tensor x = tensor_of({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor gamma = tensor_of({2}, {1, 3});
  Tensor beta = tensor_of({2}, {0, 1});
  Tensor running_mean = tensor_of({2}, {2, -1});
  Tensor running_var = tensor_of({2}, {4, 0.25f});
  auto out = run_forward("batch_norm", Attrs().set("mode", "test").set("eps", 0.0),
                         {x, gamma, beta, running_mean, running_var});
  CHECK(out[0].data()[0] == Approx((1 - 2) / 2.0));
  CHECK(out[0].data()[1] == Approx(3 * (2 + 1) / 0.5 + 1));
  CHECK(out[0].data()[4] == Approx((5 - 2) / 2.0));
  CHECK(out[1].data()[1] == -1.0f);
  CHECK(out[2].data()[1] == Approx(2.0));
  for (int c = 0; c < 2; ++c) {
    CHECK(out[3].data()[c] == running_mean.data()[c]);
    CHECK(out[4].data()[c] == running_var.data()[c]);
  }
}

TEST_CASE("batch_norm on a large tensor matches a double reference", "[batch_norm]") {
  Rng rng(71);
  Tensor x = random_tensor({16, 8, 12, 12}, rng, 2, 4);
  Tensor gamma = random_tensor({8}, rng), beta = random_tensor({8}, rng);
  Tensor rm({8}), rv({8});
  auto out = run_forward("batch_norm", {}, {x, gamma, beta, rm, rv});
  for (int64_t c = 0; c < 8; ++c) {
    double sum = 0, squares = 0;
    for (int64_t i = 0; i < 16; ++i) {
      for (int64_t s = 0; s < 144; ++s) sum += x.data()[(i * 8 + c) * 144 + s];
    }
    const double mean = sum / (16 * 144);
    for (int64_t i = 0; i < 16; ++i) {
      for (int64_t s = 0; s < 144; ++s) {
        const double d = x.data()[(i * 8 + c) * 144 + s] - mean;
        squares += d * d;
      }
    }
    const double var = squares / (16 * 144);
    CHECK(out[1].data()[c] == Approx(mean).epsilon(1e-6));
    CHECK(out[2].data()[c] == Approx(1 / std::sqrt(var + 1e-5)).epsilon(1e-5));
    const int64_t k = (5 * 8 + c) * 144 + 7;
    CHECK(out[0].data()[k] ==
          Approx(gamma.data()[c] * (x.data()[k] - mean) / std::sqrt(var + 1e-5) + beta.data()[c])
              .margin(1e-5));
  }
}

// Tagged [isa]: the kernels run compiled for AVX2 or the baseline (isa_loops.hpp; ctest reruns
// [isa] under each cap), and every version must give these bits.
TEST_CASE("batch_norm and its gradient keep one order of operations under every vector ISA",
          "[batch_norm][determinism][isa]") {
  Rng rng(75);
  // Rows shorter than the eight lanes, with a tail, of whole vectors of 16; and a tensor large
  // enough to be threaded.
  for (const Shape& shape :
       {Shape{3, 5, 7}, Shape{4, 3, 5, 5}, Shape{2, 4, 32}, Shape{16, 8, 20, 20}}) {
    INFO("x " << shape);
    const int64_t n = shape[0], channels = shape[1], inner = shape.count_from(2);
    const Tensor x = random_tensor(shape, rng, -3, 5), dy = random_tensor(shape, rng);
    const Tensor gamma = random_tensor({channels}, rng), beta = random_tensor({channels}, rng);
    const Tensor rm = random_tensor({channels}, rng),
                 rv = random_tensor({channels}, rng, 0.5f, 1.5f);
    const Attrs attrs = Attrs().set("momentum", 0.8);
    const auto out = run_forward("batch_norm", attrs, {x, gamma, beta, rm, rv});
    const auto grad = run_forward("batch_norm_grad", attrs, {x, gamma, out[1], out[2], dy});
    const float eps = 1e-5f, momentum = 0.8f;
    const double m = static_cast<double>(n * inner);
    for (int64_t c = 0; c < channels; ++c) {
      INFO("channel " << c);
      auto at = [&](const Tensor& t, int64_t i, int64_t s) {
        return t.data()[(i * channels + c) * inner + s];
      };
      double sum = 0, squares = 0, sum_dy = 0, sum_dy_centered = 0;
      for (int64_t i = 0; i < n; ++i)
        sum += eight_lane_sum(inner, [&](int64_t s) { return at(x, i, s); });
      const float mean = static_cast<float>(sum / m);
      for (int64_t i = 0; i < n; ++i) {
        squares += eight_lane_sum(
            inner, [&](int64_t s) { return (at(x, i, s) - mean) * (at(x, i, s) - mean); });
        sum_dy += eight_lane_sum(inner, [&](int64_t s) { return at(dy, i, s); });
        sum_dy_centered +=
            eight_lane_sum(inner, [&](int64_t s) { return at(dy, i, s) * (at(x, i, s) - mean); });
      }
      const float inv_std = 1.0f / std::sqrt(static_cast<float>(squares / m) + eps);
      CHECK(out[1].data()[c] == mean);
      CHECK(out[2].data()[c] == inv_std);
      CHECK(out[3].data()[c] == momentum * rm.data()[c] + (1.0f - momentum) * mean);
      CHECK(out[4].data()[c] ==
            momentum * rv.data()[c] + (1.0f - momentum) * static_cast<float>(squares / (m - 1)));
      const float scale = gamma.data()[c] * inv_std, shift = beta.data()[c] - mean * scale;
      const float dg = static_cast<float>(sum_dy_centered) * inv_std;
      CHECK(grad[1].data()[c] == dg);
      CHECK(grad[2].data()[c] == static_cast<float>(sum_dy));
      const float mean_dy = static_cast<float>(sum_dy / m),
                  slope = static_cast<float>(dg * inv_std / m);
      int64_t wrong_y = 0, wrong_dx = 0;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t s = 0; s < inner; ++s) {
          const float y = at(x, i, s) * scale + shift;
          const float dx = scale * (at(dy, i, s) - mean_dy - (at(x, i, s) - mean) * slope);
          wrong_y += std::memcmp(&y, &out[0].data()[(i * channels + c) * inner + s], 4) != 0;
          wrong_dx += std::memcmp(&dx, &grad[0].data()[(i * channels + c) * inner + s], 4) != 0;
        }
      }
      CHECK(wrong_y == 0);
      CHECK(wrong_dx == 0);
    }
  }
}

TEST_CASE("batch_norm gradient passes the numeric check", "[batch_norm]") {
  Rng rng(72);
  GradientCheckOptions options;
  options.loss_outputs = {0};
  options.checked_inputs = {0, 1, 2};
  for (const char* mode : {"train", "test"}) {
    INFO(mode);
    Attrs attrs = Attrs().set("mode", mode);
    Tensor rv = random_tensor({3}, rng, 0.5f, 1.5f);
    check_gradient("batch_norm", attrs,
                   {random_tensor({3, 3, 2, 2}, rng), random_tensor({3}, rng),
                    random_tensor({3}, rng), random_tensor({3}, rng), rv},
                   options);
    check_gradient("batch_norm", attrs,
                   {random_tensor({5, 3}, rng), random_tensor({3}, rng), random_tensor({3}, rng),
                    random_tensor({3}, rng), rv},
                   options);
  }
}

TEST_CASE("batch_norm rejects mismatched shapes", "[batch_norm]") {
  Rng rng(73);
  Tensor x = random_tensor({4, 3, 2, 2}, rng);
  Tensor c3 = random_tensor({3}, rng);
  REQUIRE_THROWS_WITH(run_forward("batch_norm", {}, {x, random_tensor({4}, rng), c3, c3, c3}),
                      Catch::Contains("input 1 (gamma) has shape [4], expected [3]"));
  REQUIRE_THROWS_WITH(run_forward("batch_norm", {}, {random_tensor({1, 3}, rng), c3, c3, c3, c3}),
                      Catch::Contains("training needs more than one value per channel"));
  REQUIRE_THROWS_WITH(run_forward("batch_norm", Attrs().set("mode", "eval"), {x, c3, c3, c3, c3}),
                      Catch::Contains("mode is 'eval', expected 'train' or 'test'"));
}

TEST_CASE("batch_norm_relu is batch_norm then relu bit for bit, and its gradient theirs",
          "[batch_norm][fusion][determinism][isa]") {
  Rng rng(74);
  const Tensor x = random_tensor({6, 4, 5, 5}, rng, -2, 2), dy = random_tensor({6, 4, 5, 5}, rng);
  const Tensor gamma = random_tensor({4}, rng), beta = random_tensor({4}, rng);
  const Tensor rm = random_tensor({4}, rng), rv = random_tensor({4}, rng, 0.5f, 1.5f);
  for (const char* mode : {"train", "test"}) {
    INFO(mode);
    const Attrs attrs = Attrs().set("mode", mode).set("momentum", 0.8);
    const std::vector<Tensor> in{x, gamma, beta, rm, rv};
    const auto bn = run_forward("batch_norm", attrs, in);
    const auto relu = run_forward("relu", {}, {bn[0]});
    const auto fused = run_forward("batch_norm_relu", attrs, in);
    REQUIRE(fused.size() == 5);
    CHECK(same_bits(fused[0], relu[0]));
    for (int i = 1; i < 5; ++i) CHECK(same_bits(fused[i], bn[i]));
    // Both sides of the ReLU are exercised.
    const float* y = fused[0].data();
    const int64_t zeros = std::count(y, y + x.shape().count(), 0.0f);
    CHECK(zeros > x.shape().count() / 5);
    CHECK(zeros < x.shape().count() * 4 / 5);

    const auto dz = run_forward("relu_grad", {}, {relu[0], dy});
    const auto plain = run_forward("batch_norm_grad", attrs, {x, gamma, bn[1], bn[2], dz[0]});
    const auto fused_grad =
        run_forward("batch_norm_relu_grad", attrs, {x, gamma, bn[1], bn[2], fused[0], dy});
    REQUIRE(fused_grad.size() == 3);
    for (int i = 0; i < 3; ++i) {
      INFO("output " << i);
      CHECK(same_bits(fused_grad[i], plain[i]));
    }
  }
}

TEST_CASE("batch_norm_relu_grad rejects a y or dy of another shape", "[batch_norm][fusion]") {
  Rng rng(75);
  const Tensor x = random_tensor({4, 3, 2, 2}, rng), c3 = random_tensor({3}, rng);
  const Tensor other = random_tensor({4, 3, 2, 1}, rng);
  REQUIRE_THROWS_WITH(run_forward("batch_norm_relu_grad", {}, {x, c3, c3, c3, other, x}),
                      Catch::Contains("batch_norm_relu_grad: input 4 (y) has shape [4,3,2,1], "
                                      "expected input 0's (x) shape [4,3,2,2]"));
  REQUIRE_THROWS_WITH(run_forward("batch_norm_relu_grad", {}, {x, c3, c3, c3, x, other}),
                      Catch::Contains("input 5 (dy) has shape [4,3,2,1]"));
  REQUIRE_THROWS_WITH(
      run_forward("batch_norm_relu", {}, {random_tensor({1, 3}, rng), c3, c3, c3, c3}),
      Catch::Contains("batch_norm_relu: training needs more than one value"));
}

TEST_CASE("batch_norm in channel blocks gives the plain kernels' bits", "[batch_norm][isa]") {
  Rng rng(75);
  // One image too: the kernels' workspace then holds as many per-image sums as channel sums.
  for (const Shape& shape :
       {Shape{6, 16, 5, 5}, Shape{3, 32, 7, 7}, Shape{4, 16, 4, 4}, Shape{1, 16, 3, 3}}) {
    const int64_t c = shape[1];
    const Tensor x = random_tensor(shape, rng, -2, 2), dy = random_tensor(shape, rng);
    const Tensor gamma = random_tensor({c}, rng), beta = random_tensor({c}, rng);
    const Tensor rm = random_tensor({c}, rng), rv = random_tensor({c}, rng, 0.5f, 1.5f);
    for (int block : {8, 16}) {
      for (const char* mode : {"train", "test"}) {
        INFO(shape << " in blocks of " << block << ", mode " << mode);
        const Attrs attrs = Attrs().set("mode", mode).set("momentum", 0.8);
        for (const char* type : {"batch_norm", "batch_norm_relu"}) {
          INFO(type);
          const std::vector<Tensor> in{x, gamma, beta, rm, rv};
          const auto plain = run_forward(type, attrs, in);
          int blocked = 0;
          const auto got = run_forward_blocked(type, attrs, in, block, &blocked);
          CHECK(blocked == 2);  // x and y
          for (int i = 0; i < 5; ++i) CHECK(same_bits(got[i], plain[i]));

          const bool relu = std::string(type) == "batch_norm_relu";
          std::vector<Tensor> grad_in{x, gamma, plain[1], plain[2]};
          if (relu) grad_in.push_back(plain[0]);
          grad_in.push_back(dy);
          const std::string grad = std::string(type) + "_grad";
          const auto plain_grad = run_forward(grad, attrs, grad_in);
          const auto got_grad = run_forward_blocked(grad, attrs, grad_in, block, &blocked);
          CHECK(blocked == (relu ? 4 : 3));  // x, (y,) dy and dx
          for (int i = 0; i < 3; ++i) CHECK(same_bits(got_grad[i], plain_grad[i]));
        }
      }
    }
  }
}
