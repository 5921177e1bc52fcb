// The pieces of synchronized batch norm (operators/sync_batch_norm.hpp) over one replica (every
// total its own partial) give batch_norm's outputs and gradients to float rounding; over two
// halves of a batch, their summed partials give the whole batch's.
#include <catch2/catch.hpp>
#include <cmath>

#include "operators/registry.hpp"
#include "tests/operators/gradient_test.hpp"
#include "tests/operators/lane_order.hpp"
#include "tests/same_bits.hpp"

using namespace purine;
using namespace purine::testing;

namespace {

double max_difference(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  double worst = 0;
  for (int64_t i = 0; i < a.shape().count(); ++i)
    worst = std::max(worst, std::abs(double(a.data()[i]) - double(b.data()[i])));
  return worst;
}

Tensor sum_of(const Tensor& a, const Tensor& b) { return run_forward("sum", {}, {a, b})[0]; }

// x's first or second half along N.
Tensor half(const Tensor& x, int which) {
  const int64_t n = x.shape()[0] / 2, per = x.shape().count() / x.shape()[0];
  Shape shape = x.shape();
  std::vector<int64_t> dims = shape.dims();
  dims[0] = n;
  std::vector<float> values(x.data() + which * n * per, x.data() + (which + 1) * n * per);
  return tensor_of(Shape(dims), values);
}

}  // namespace

TEST_CASE("sync batch norm over one replica equals batch_norm", "[batch_norm][sync_bn]") {
  Rng rng(5);
  const Tensor x = random_tensor({6, 3, 5, 5}, rng, -1, 3), dy = random_tensor({6, 3, 5, 5}, rng);
  const Tensor gamma = random_tensor({3}, rng), beta = random_tensor({3}, rng);
  const Tensor mean = random_tensor({3}, rng), var = random_tensor({3}, rng, 0.5f, 2);
  const Attrs attrs = Attrs().set("eps", 1e-5).set("momentum", 0.8);
  const auto plain = run_forward("batch_norm", attrs, {x, gamma, beta, mean, var});
  const Tensor sums = run_forward("batch_norm_sums", {}, {x})[0];
  CHECK(sums.data()[3] == 150.0f);  // the count, N H W
  const Tensor squares = run_forward("batch_norm_square_sums", {}, {x, sums})[0];
  const auto synced =
      run_forward("sync_batch_norm", attrs, {x, gamma, beta, mean, var, sums, squares});
  REQUIRE(synced.size() == 5);
  for (int i = 0; i < 5; ++i) {
    INFO("output " << i);
    CHECK(max_difference(synced[i], plain[i]) < 1e-5);
  }
  const auto plain_grad = run_forward("batch_norm_grad", attrs, {x, gamma, plain[1], plain[2], dy});
  const Tensor local = run_forward("batch_norm_grad_sums", {}, {x, synced[1], dy})[0];
  const auto synced_grad = run_forward("sync_batch_norm_grad", attrs,
                                       {x, gamma, synced[1], synced[2], dy, local, local});
  for (int i = 0; i < 3; ++i) {
    INFO("gradient " << i);
    CHECK(max_difference(synced_grad[i], plain_grad[i]) < 1e-5);
  }
}

// Tagged [isa]: the sums run compiled for AVX2 or the baseline (isa_loops.hpp; ctest reruns
// [isa] under each cap), each in batch_norm's order of operations.
TEST_CASE("sync batch norm's partial sums keep one order of operations under every vector ISA",
          "[batch_norm][sync_bn][determinism][isa]") {
  Rng rng(6);
  for (const Shape& shape : {Shape{3, 5, 7}, Shape{4, 3, 5, 5}, Shape{16, 8, 20, 20}}) {
    INFO("x " << shape);
    const int64_t n = shape[0], channels = shape[1], inner = shape.count_from(2);
    const Tensor x = random_tensor(shape, rng, -3, 5), dy = random_tensor(shape, rng);
    const Tensor sums = run_forward("batch_norm_sums", {}, {x})[0];
    const Tensor squares = run_forward("batch_norm_square_sums", {}, {x, sums})[0];
    const Tensor mean = random_tensor({channels}, rng);
    const Tensor grad_sums = run_forward("batch_norm_grad_sums", {}, {x, mean, dy})[0];
    for (int64_t c = 0; c < channels; ++c) {
      INFO("channel " << c);
      auto at = [&](const Tensor& t, int64_t i, int64_t s) {
        return t.data()[(i * channels + c) * inner + s];
      };
      const float batch_mean = static_cast<float>(sums.data()[c] / sums.data()[channels]);
      const float m = mean.data()[c];
      double sum = 0, square = 0, sum_dy = 0, sum_dy_centered = 0;
      for (int64_t i = 0; i < n; ++i) {
        sum += eight_lane_sum(inner, [&](int64_t s) { return at(x, i, s); });
        square += eight_lane_sum(inner, [&](int64_t s) {
          return (at(x, i, s) - batch_mean) * (at(x, i, s) - batch_mean);
        });
        sum_dy += eight_lane_sum(inner, [&](int64_t s) { return at(dy, i, s); });
        sum_dy_centered +=
            eight_lane_sum(inner, [&](int64_t s) { return at(dy, i, s) * (at(x, i, s) - m); });
      }
      CHECK(sums.data()[c] == static_cast<float>(sum));
      CHECK(squares.data()[c] == static_cast<float>(square));
      CHECK(grad_sums.data()[c] == static_cast<float>(sum_dy));
      CHECK(grad_sums.data()[channels + c] == static_cast<float>(sum_dy_centered));
    }
  }
}

TEST_CASE("sync batch norm over two halves of a batch follows the whole batch",
          "[batch_norm][sync_bn]") {
  Rng rng(6);
  const Tensor x = random_tensor({8, 2, 3, 3}, rng, -1, 3), dy = random_tensor({8, 2, 3, 3}, rng);
  const Tensor gamma = random_tensor({2}, rng), beta = random_tensor({2}, rng);
  const Tensor mean = random_tensor({2}, rng), var = random_tensor({2}, rng, 0.5f, 2);
  const auto whole = run_forward("batch_norm", {}, {x, gamma, beta, mean, var});
  const auto whole_grad = run_forward("batch_norm_grad", {}, {x, gamma, whole[1], whole[2], dy});
  const Tensor xs[2] = {half(x, 0), half(x, 1)}, dys[2] = {half(dy, 0), half(dy, 1)};
  const Tensor sums = sum_of(run_forward("batch_norm_sums", {}, {xs[0]})[0],
                             run_forward("batch_norm_sums", {}, {xs[1]})[0]);
  const Tensor squares = sum_of(run_forward("batch_norm_square_sums", {}, {xs[0], sums})[0],
                                run_forward("batch_norm_square_sums", {}, {xs[1], sums})[0]);
  std::vector<std::vector<Tensor>> out, local;
  for (int r = 0; r < 2; ++r) {
    out.push_back(
        run_forward("sync_batch_norm", {}, {xs[r], gamma, beta, mean, var, sums, squares}));
    local.push_back(run_forward("batch_norm_grad_sums", {}, {xs[r], out[r][1], dys[r]}));
  }
  const Tensor total = sum_of(local[0][0], local[1][0]);
  for (int r = 0; r < 2; ++r) {
    INFO("replica " << r);
    CHECK(max_difference(out[r][0], half(whole[0], r)) < 1e-5);
    for (int i = 1; i < 5; ++i) CHECK(max_difference(out[r][i], whole[i]) < 1e-5);
    const auto grad = run_forward("sync_batch_norm_grad", {},
                                  {xs[r], gamma, out[r][1], out[r][2], dys[r], local[r][0], total});
    CHECK(max_difference(grad[0], half(whole_grad[0], r)) < 1e-5);
    local[r] = grad;
  }
  // Each replica's dgamma and dbeta are its own share; their sum is the whole batch's.
  CHECK(max_difference(sum_of(local[0][1], local[1][1]), whole_grad[1]) < 1e-5);
  CHECK(max_difference(sum_of(local[0][2], local[1][2]), whole_grad[2]) < 1e-5);
}

TEST_CASE("sync batch norm in channel blocks gives the plain kernels' bits",
          "[batch_norm][sync_bn][isa]") {
  Rng rng(7);
  for (const Shape& shape : {Shape{6, 16, 5, 5}, Shape{3, 32, 7, 7}, Shape{1, 16, 3, 3}}) {
    const int64_t c = shape[1];
    const Tensor x = random_tensor(shape, rng, -2, 2), dy = random_tensor(shape, rng);
    const Tensor gamma = random_tensor({c}, rng), beta = random_tensor({c}, rng);
    const Tensor rm = random_tensor({c}, rng), rv = random_tensor({c}, rng, 0.5f, 1.5f);
    for (int block : {8, 16}) {
      INFO(shape << " in blocks of " << block);
      const Attrs attrs = Attrs().set("momentum", 0.8);
      // Each op plain, then blocked with the plain results as its other inputs; `expected` is
      // how many of its tensors the blocked run gives blocks.
      const auto both = [&](const char* type, const std::vector<Tensor>& in, int expected) {
        INFO(type);
        const auto plain = run_forward(type, attrs, in);
        int blocked = 0;
        const auto got = run_forward_blocked(type, attrs, in, block, &blocked);
        CHECK(blocked == expected);
        REQUIRE(got.size() == plain.size());
        for (size_t i = 0; i < got.size(); ++i) CHECK(same_bits(got[i], plain[i]));
        return plain;
      };
      const Tensor sums = both("batch_norm_sums", {x}, 1)[0];
      const Tensor squares = both("batch_norm_square_sums", {x, sums}, 1)[0];
      const auto y = both("sync_batch_norm", {x, gamma, beta, rm, rv, sums, squares}, 2);
      const Tensor grad_sums = both("batch_norm_grad_sums", {x, y[1], dy}, 2)[0];
      // Another replica's share in the totals: grad_sums doubled.
      const Tensor totals = sum_of(grad_sums, grad_sums);
      both("sync_batch_norm_grad", {x, gamma, y[1], y[2], dy, grad_sums, totals}, 3);
    }
  }
}
