#include <catch2/catch.hpp>
#include <cmath>

#include "tests/operators/gradient_test.hpp"

using namespace purine;
using namespace purine::testing;

namespace {

// Softmax along `axis` of a contiguous tensor, in double precision.
std::vector<double> reference_softmax(const Tensor& x, int axis) {
  const Shape& s = x.shape();
  const int64_t outer = s.count_to(axis), channels = s[axis], inner = s.count_from(axis + 1);
  std::vector<double> y(x.count());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      double sum = 0;
      for (int64_t c = 0; c < channels; ++c) {
        sum += std::exp(static_cast<double>(x.data()[(o * channels + c) * inner + j]));
      }
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t k = (o * channels + c) * inner + j;
        y[k] = std::exp(static_cast<double>(x.data()[k])) / sum;
      }
    }
  }
  return y;
}

}  // namespace

TEST_CASE("softmax of rows matches hand values", "[softmax]") {
  Tensor x = tensor_of({2, 3}, {0.0f, 0.0f, 0.0f, 1.0f, 2.0f, 3.0f});
  Tensor y = run_forward("softmax", {}, {x})[0];
  for (int c = 0; c < 3; ++c) CHECK(y.data()[c] == Approx(1.0 / 3));
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  CHECK(y.data()[3] == Approx(std::exp(1.0) / z));
  CHECK(y.data()[5] == Approx(std::exp(3.0) / z));
}

TEST_CASE("softmax is stable for large logits", "[softmax]") {
  Tensor x = tensor_of({1, 2}, {1000.0f, 1000.0f});
  Tensor y = run_forward("softmax", {}, {x})[0];
  CHECK(y.data()[0] == Approx(0.5));
  CHECK(y.data()[1] == Approx(0.5));
}

TEST_CASE("softmax over the channels of a 4-d tensor", "[softmax]") {
  Rng rng(5);
  Tensor x = random_tensor({2, 3, 2, 2}, rng, -2, 2);
  Tensor y = run_forward("softmax", {}, {x})[0];
  std::vector<double> expected = reference_softmax(x, 1);
  for (int64_t i = 0; i < x.count(); ++i) CHECK(y.data()[i] == Approx(expected[i]));
  // A negative axis counts from the end.
  Tensor last = run_forward("softmax", Attrs().set("axis", -1), {x})[0];
  expected = reference_softmax(x, 3);
  for (int64_t i = 0; i < x.count(); ++i) CHECK(last.data()[i] == Approx(expected[i]));
}

TEST_CASE("large softmax takes the threaded path", "[softmax]") {
  Rng rng(6);
  Tensor x = random_tensor({64, 8, 7, 9}, rng, -3, 3);
  Tensor y = run_forward("softmax", {}, {x})[0];
  std::vector<double> expected = reference_softmax(x, 1);
  for (int64_t i = 0; i < x.count(); i += 101) CHECK(y.data()[i] == Approx(expected[i]));
  Tensor rows = random_tensor({512, 100}, rng, -3, 3);
  Tensor yr = run_forward("softmax", {}, {rows})[0];
  expected = reference_softmax(rows, 1);
  for (int64_t i = 0; i < rows.count(); i += 101) CHECK(yr.data()[i] == Approx(expected[i]));
}

TEST_CASE("softmax gradient passes the numeric check", "[softmax]") {
  Rng rng(12);
  check_gradient("softmax", {}, {random_tensor({3, 5}, rng, -2, 2)});
  check_gradient("softmax", {}, {random_tensor({2, 3, 2, 3}, rng, -2, 2)});
  check_gradient("softmax", Attrs().set("axis", 2), {random_tensor({2, 3, 4}, rng, -2, 2)});
}

TEST_CASE("softmax rejects a bad axis and mismatched gradient shapes", "[softmax]") {
  Tensor x({2, 3});
  REQUIRE_THROWS_WITH(run_forward("softmax", Attrs().set("axis", 2), {x}),
                      Catch::Contains("'axis' is 2") && Catch::Contains("2 dimensions [2,3]"));
  REQUIRE_THROWS_WITH(run_forward("softmax_grad", {}, {x, Tensor({2, 4})}),
                      Catch::Contains("input 1 (dy) has shape [2,4]"));
}
