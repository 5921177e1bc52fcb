#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

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

// The CPU kernel's float arithmetic in its order, one element at a time: the window's squares
// summed in channel order, k + alpha / size * sum, scale^-0.75 as 1 / (r sqrt(r)) with r the
// square root, then for the gradient dy y / scale summed over the same windows.
struct ScalarLrn {
  int64_t n, c, s, size;
  float alpha, beta = 0.75f, k;
  int64_t at(int64_t i, int64_t j, int64_t l) const { return (i * c + j) * s + l; }
  float scale(const float* x, int64_t i, int64_t j, int64_t l) const {
    float sum = 0.0f;
    for (int64_t jj = std::max<int64_t>(0, j - (size - 1) / 2);
         jj <= std::min(c - 1, j + (size - 1) / 2); ++jj)
      sum += x[at(i, jj, l)] * x[at(i, jj, l)];
    return k + alpha / static_cast<float>(size) * sum;
  }
  static float inverse_power(float scale) {
    const float root = std::sqrt(scale);
    return 1.0f / (root * std::sqrt(root));
  }
  std::vector<float> forward(const float* x) const {
    std::vector<float> y(n * c * s);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < c; ++j)
        for (int64_t l = 0; l < s; ++l)
          y[at(i, j, l)] = x[at(i, j, l)] * inverse_power(scale(x, i, j, l));
    return y;
  }
  std::vector<float> backward(const float* x, const float* y, const float* dy) const {
    const float coef = 2.0f * alpha * beta / static_cast<float>(size);
    std::vector<float> dx(n * c * s);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < c; ++j)
        for (int64_t l = 0; l < s; ++l) {
          float window = 0.0f;
          for (int64_t jj = std::max<int64_t>(0, j - (size - 1) / 2);
               jj <= std::min(c - 1, j + (size - 1) / 2); ++jj)
            window += dy[at(i, jj, l)] * y[at(i, jj, l)] / scale(x, i, jj, l);
          const float g = dy[at(i, j, l)];
          dx[at(i, j, l)] = g * inverse_power(scale(x, i, j, l)) - coef * x[at(i, j, l)] * window;
        }
    return dx;
  }
};

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

TEST_CASE("lrn gives the bits of scalar arithmetic in every vector version",
          "[lrn][determinism][isa]") {
  // Its loops run in AVX-512, AVX2 or baseline versions (vector_isa(): ctest reruns this under
  // ONEDNN_MAX_CPU_ISA=AVX2 and SSE41); each must give the bits of the same operations one
  // element at a time. 300 positions: strips of 256 and a remainder; 7 channels, windows cut at
  // both ends.
  const ScalarLrn ref{3, 7, 300, 5, 2e-2f, 0.75f, 1.5f};
  Rng rng(17);
  Tensor x = random_tensor({3, 7, 15, 20}, rng), dy = random_tensor({3, 7, 15, 20}, rng);
  const Attrs attrs = Attrs().set("size", 5).set("alpha", 2e-2).set("beta", 0.75).set("k", 1.5);
  Tensor y = run_forward("lrn", attrs, {x})[0];
  Tensor dx = run_forward("lrn_grad", attrs, {x, y, dy})[0];
  const std::vector<float> y_ref = ref.forward(x.data());
  const std::vector<float> dx_ref = ref.backward(x.data(), y.data(), dy.data());
  CHECK(std::memcmp(y.data(), y_ref.data(), sizeof(float) * y_ref.size()) == 0);
  CHECK(std::memcmp(dx.data(), dx_ref.data(), sizeof(float) * dx_ref.size()) == 0);
}
