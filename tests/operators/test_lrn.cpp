#include <catch2/catch.hpp>
#include <cmath>

#include "operators/registry.hpp"
#include "tests/operators/gradient_test.hpp"

using namespace purine;
using namespace purine::testing;

namespace {

// The caffe formula, in double.
std::vector<double> naive_lrn(const Tensor& x, int64_t size, double alpha, double beta, double k) {
  const int64_t n = x.shape()[0], c = x.shape()[1], s = x.shape().count_from(2);
  std::vector<double> y(x.count());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < c; ++j) {
      for (int64_t l = 0; l < s; ++l) {
        double sum = 0;
        for (int64_t jj = j - (size - 1) / 2; jj <= j + (size - 1) / 2; ++jj) {
          if (jj < 0 || jj >= c) continue;
          const double v = x.data()[(i * c + jj) * s + l];
          sum += v * v;
        }
        const double scale = k + alpha / size * sum;
        y[(i * c + j) * s + l] = x.data()[(i * c + j) * s + l] / std::pow(scale, beta);
      }
    }
  }
  return y;
}

}  // namespace

TEST_CASE("lrn forward of one pixel by hand", "[lrn]") {
  // Three channels, size 3, alpha 3 (alpha / size = 1), beta 0.5, k 1.
  Tensor x = tensor_of({1, 3}, {1, 2, 3});
  Attrs attrs = Attrs().set("size", 3).set("alpha", 3.0).set("beta", 0.5).set("k", 1.0);
  Tensor y = run_forward("lrn", attrs, {x})[0];
  CHECK(y.data()[0] == Approx(1 / std::sqrt(1.0 + 1 + 4)));
  CHECK(y.data()[1] == Approx(2 / std::sqrt(1.0 + 1 + 4 + 9)));
  CHECK(y.data()[2] == Approx(3 / std::sqrt(1.0 + 4 + 9)));
}

TEST_CASE("lrn matches the caffe formula", "[lrn]") {
  Rng rng(61);
  SECTION("defaults (size 5, beta 0.75) on a few channels") {
    Tensor x = random_tensor({2, 7, 3, 2}, rng, -3, 3);
    Tensor y = run_forward("lrn", Attrs().set("alpha", 0.5), {x})[0];
    std::vector<double> expected = naive_lrn(x, 5, 0.5, 0.75, 1.0);
    for (int64_t i = 0; i < y.count(); ++i) CHECK(y.data()[i] == Approx(expected[i]).margin(1e-6));
  }
  SECTION("other parameters, more pixels than one strip, threaded") {
    Tensor x = random_tensor({3, 12, 17, 19}, rng, -2, 2);
    Attrs attrs = Attrs().set("size", 3).set("alpha", 0.1).set("beta", 0.6).set("k", 2.0);
    Tensor y = run_forward("lrn", attrs, {x})[0];
    std::vector<double> expected = naive_lrn(x, 3, 0.1, 0.6, 2.0);
    for (int64_t i = 0; i < y.count(); ++i) CHECK(y.data()[i] == Approx(expected[i]).margin(1e-6));
  }
}

TEST_CASE("lrn gradient passes the numeric check", "[lrn]") {
  Rng rng(62);
  // A large alpha makes the cross-channel term matter.
  check_gradient("lrn", Attrs().set("alpha", 0.5), {random_tensor({2, 7, 2, 3}, rng, -2, 2)});
  check_gradient("lrn", Attrs().set("size", 3).set("alpha", 1.0).set("beta", 0.6).set("k", 2.0),
                 {random_tensor({2, 4, 3}, rng, -2, 2)});
}

TEST_CASE("lrn rejects an even size and a bad shape", "[lrn]") {
  Rng rng(63);
  REQUIRE_THROWS_WITH(
      run_forward("lrn", Attrs().set("size", 4), {random_tensor({1, 5, 2, 2}, rng)}),
      Catch::Contains("size is 4, expected an odd number"));
  REQUIRE_THROWS_WITH(run_forward("lrn", {}, {random_tensor({5}, rng)}),
                      Catch::Contains("input 0 (x) has shape [5], expected rank 2 or more"));
  REQUIRE_THROWS_WITH(
      run_forward(
          "lrn_grad", {},
          {random_tensor({1, 5}, rng), random_tensor({1, 5}, rng), random_tensor({1, 4}, rng)}),
      Catch::Contains("input 2 (dy) has shape [1,4], expected input 0's (x) shape [1,5]"));
}
