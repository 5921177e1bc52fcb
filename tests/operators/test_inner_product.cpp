#include <omp.h>

#include <algorithm>
#include <catch2/catch.hpp>

#include "operators/registry.hpp"
#include "tests/operators/gradient_test.hpp"
#include "tests/same_bits.hpp"

using namespace purine;
using namespace purine::testing;

namespace {

// y [N, O] = x [N, K] w [O, K]^T in double.
std::vector<double> naive_inner_product(const Tensor& x, const Tensor& w) {
  const int64_t n = x.shape()[0], k = x.shape().count_from(1), o = w.shape()[0];
  std::vector<double> y(n * o, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < o; ++j) {
      for (int64_t l = 0; l < k; ++l)
        y[i * o + j] += double{x.data()[i * k + l]} * w.data()[j * k + l];
    }
  }
  return y;
}

void check_close(const Tensor& got, const std::vector<double>& expected, double tolerance) {
  REQUIRE(got.count() == static_cast<int64_t>(expected.size()));
  for (int64_t i = 0; i < got.count(); ++i) {
    INFO("element " << i);
    CHECK(got.data()[i] == Approx(expected[i]).margin(tolerance));
  }
}

// Runs `type` with `threads` OpenMP threads on this thread.
std::vector<Tensor> run_with_threads(int threads, const std::string& type,
                                     const std::vector<Tensor>& inputs) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  std::vector<Tensor> outputs = run_forward(type, {}, inputs);
  omp_set_num_threads(saved);
  return outputs;
}

}  // namespace

TEST_CASE("inner_product forward multiplies by the transposed weight", "[inner_product]") {
  Tensor x = tensor_of({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor w = tensor_of({2, 3}, {1, 0, -1, 0.5f, 0.5f, 0.5f});
  Tensor y = run_forward("inner_product", {}, {x, w})[0];
  REQUIRE(y.shape() == Shape{2, 2});
  CHECK(y.data()[0] == -2.0f);  // 1 - 3
  CHECK(y.data()[1] == 3.0f);   // (1 + 2 + 3) / 2
  CHECK(y.data()[2] == -2.0f);  // 4 - 6
  CHECK(y.data()[3] == 7.5f);   // (4 + 5 + 6) / 2
}

TEST_CASE("inner_product flattens x and matches a naive product", "[inner_product]") {
  Rng rng(11);
  // 64 x 128 x 100 is split into blocks; 3 x 5 x 8 is one block.
  for (auto dims : {std::vector<int64_t>{3, 2, 2, 2, 5}, std::vector<int64_t>{64, 4, 5, 5, 128}}) {
    Tensor x = random_tensor({dims[0], dims[1], dims[2], dims[3]}, rng);
    Tensor w = random_tensor({dims[4], dims[1] * dims[2] * dims[3]}, rng);
    Tensor y = run_forward("inner_product", {}, {x, w})[0];
    REQUIRE(y.shape() == Shape{dims[0], dims[4]});
    check_close(y, naive_inner_product(x, w), 1e-4);
  }
}

TEST_CASE("inner_product gradient kernels match naive products", "[inner_product]") {
  Rng rng(12);
  Tensor x = random_tensor({64, 3, 40}, rng);
  Tensor w = random_tensor({200, 120}, rng);
  Tensor dy = random_tensor({64, 200}, rng);
  Tensor dx = run_forward("inner_product_grad_data", {}, {dy, w, x})[0];
  Tensor dw = run_forward("inner_product_grad_weight", {}, {dy, x})[0];
  REQUIRE(dx.shape() == x.shape());
  REQUIRE(dw.shape() == w.shape());
  // dx = dy w: the naive product of dy with w^T's transpose.
  Tensor wt({120, 200});
  for (int64_t o = 0; o < 200; ++o) {
    for (int64_t k = 0; k < 120; ++k) wt.mutable_data()[k * 200 + o] = w.data()[o * 120 + k];
  }
  check_close(dx, naive_inner_product(dy, wt), 1e-4);
  // dw = dy^T x
  Tensor dyt({200, 64}), xt({120, 64});
  for (int64_t i = 0; i < 64; ++i) {
    for (int64_t o = 0; o < 200; ++o) dyt.mutable_data()[o * 64 + i] = dy.data()[i * 200 + o];
    for (int64_t k = 0; k < 120; ++k) xt.mutable_data()[k * 64 + i] = x.data()[i * 120 + k];
  }
  check_close(dw, naive_inner_product(dyt, xt), 1e-4);
}

TEST_CASE("inner_product weight gradient of an empty batch is zero", "[inner_product]") {
  Tensor dy({0, 6}), x({0, 5});
  Tensor dw({6, 5});
  std::fill(dw.mutable_data(), dw.mutable_data() + dw.count(), 7.0f);  // overwritten
  auto op = OperatorRegistry::create("inner_product_grad_weight", {});
  OpContext context;
  op->compute({&dy, &x}, {&dw}, context);
  CHECK(std::all_of(dw.data(), dw.data() + dw.count(), [](float v) { return v == 0.0f; }));
}

TEST_CASE("inner_product results do not depend on the thread count",
          "[inner_product][determinism]") {
  Rng rng(13);
  Tensor x = random_tensor({64, 784}, rng);
  Tensor w = random_tensor({256, 784}, rng);
  Tensor dy = random_tensor({64, 256}, rng);
  for (const char* type :
       {"inner_product", "inner_product_grad_data", "inner_product_grad_weight"}) {
    INFO(type);
    std::vector<Tensor> inputs;
    if (std::string(type) == "inner_product") inputs = {x, w};
    if (std::string(type) == "inner_product_grad_data") inputs = {dy, w, x};
    if (std::string(type) == "inner_product_grad_weight") inputs = {dy, x};
    Tensor one = run_with_threads(1, type, inputs)[0];
    for (int threads : {2, 3, 4}) {
      INFO(threads << " threads");
      CHECK(same_bits(one, run_with_threads(threads, type, inputs)[0]));
    }
  }
}

TEST_CASE("inner_product gradient passes the numeric check", "[inner_product]") {
  Rng rng(14);
  check_gradient("inner_product", {}, {random_tensor({3, 2, 2}, rng), random_tensor({5, 4}, rng)});
}

TEST_CASE("inner_product rejects mismatched shapes", "[inner_product]") {
  Rng rng(15);
  Tensor x = random_tensor({2, 4}, rng);
  REQUIRE_THROWS_WITH(run_forward("inner_product", {}, {x, random_tensor({3, 5}, rng)}),
                      Catch::Contains("input 1 (weight) has 5 columns, input 0 has 4 features") &&
                          Catch::Contains("expected equal"));
  REQUIRE_THROWS_WITH(run_forward("inner_product", {}, {random_tensor({4}, rng), x}),
                      Catch::Contains("expected rank 2 or more"));
  REQUIRE_THROWS_WITH(run_forward("inner_product_grad_data", {},
                                  {random_tensor({2, 2}, rng), random_tensor({3, 4}, rng), x}),
                      Catch::Contains("input 0 (dy) has shape [2,2], expected [2,3]"));
}

TEST_CASE("inner_product with a large weight (its left-operand form) matches a naive product",
          "[inner_product][determinism]") {
  // 1024 x 2048 = 2 M floats: the forward computes w x^T and transposes it into y.
  Rng rng(14);
  Tensor w = random_tensor({1024, 2048}, rng);
  for (int64_t n : {1, 5, 64}) {
    INFO("batch " << n);
    Tensor x = random_tensor({n, 2048}, rng);
    Tensor one = run_with_threads(1, "inner_product", {x, w})[0];
    REQUIRE(one.shape() == Shape{n, 1024});
    check_close(one, naive_inner_product(x, w), 1e-3);
    for (int threads : {2, 3}) {
      INFO(threads << " threads");
      CHECK(same_bits(one, run_with_threads(threads, "inner_product", {x, w})[0]));
    }
  }
}
