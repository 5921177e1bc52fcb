#include <catch2/catch.hpp>
#include <cmath>

#include "operators/registry.hpp"
#include "tests/operators/gradient_test.hpp"

using namespace purine;
using namespace purine::testing;

TEST_CASE("accuracy counts rows whose label scores highest", "[accuracy]") {
  Tensor scores = tensor_of({4, 3}, {0.1f, 0.7f, 0.2f,    // label 1: correct
                                     0.5f, 0.3f, 0.2f,    // label 2: third
                                     0.2f, 0.2f, 0.6f,    // label 2: correct
                                     0.4f, 0.4f, 0.2f});  // label 1: tied for first
  Tensor labels = tensor_of({4}, {1, 2, 2, 1});
  Tensor acc = run_forward("accuracy", {}, {scores, labels})[0];
  REQUIRE(acc.shape() == Shape{});
  // A tie does not count against the row: nothing is strictly greater than 0.4.
  CHECK(acc.data()[0] == Approx(0.75));
  Tensor top2 = run_forward("accuracy", Attrs().set("top_k", 2), {scores, labels})[0];
  CHECK(top2.data()[0] == Approx(0.75));
  Tensor top3 = run_forward("accuracy", Attrs().set("top_k", 3), {scores, labels})[0];
  CHECK(top3.data()[0] == Approx(1.0));
}

TEST_CASE("accuracy counts a row with NaN scores as wrong", "[accuracy]") {
  const float nan = std::nanf("");
  Tensor scores = tensor_of({3, 2}, {nan, nan,      // label 0: all NaN
                                     0.1f, nan,     // label 0: one NaN
                                     0.2f, 0.9f});  // label 1: correct
  Tensor labels = tensor_of({3}, {0, 0, 1});
  CHECK(run_forward("accuracy", {}, {scores, labels})[0].data()[0] == Approx(1.0 / 3));
  CHECK(run_forward("accuracy", Attrs().set("top_k", 2), {scores, labels})[0].data()[0] ==
        Approx(1.0 / 3));
}

TEST_CASE("accuracy is not differentiable", "[accuracy]") {
  CHECK_FALSE(OperatorRegistry::create("accuracy")->differentiable());
}

TEST_CASE("accuracy rejects bad labels, shapes and top_k", "[accuracy]") {
  Tensor scores({2, 3});
  REQUIRE_THROWS_WITH(run_forward("accuracy", {}, {scores, tensor_of({2}, {0, 7})}),
                      Catch::Contains("label of row 1 is 7"));
  REQUIRE_THROWS_WITH(run_forward("accuracy", {}, {scores, Tensor({2, 1})}),
                      Catch::Contains("input 1 (labels) has shape [2,1]"));
  REQUIRE_THROWS_WITH(OperatorRegistry::create("accuracy", Attrs().set("top_k", 0)),
                      Catch::Contains("'top_k' is 0"));
}
