#include <catch2/catch.hpp>
#include <cmath>

#include "operators/registry.hpp"
#include "tests/operators/gradient_test.hpp"

using namespace purine;
using namespace purine::testing;

namespace {

// Random values in [-1, 1] kept at least 0.1 away from ReLU's kink at 0.
Tensor away_from_zero(const Shape& shape, Rng& rng) {
  Tensor t = random_tensor(shape, rng, -0.9f, 0.9f);
  float* p = t.mutable_data();
  for (int64_t i = 0; i < t.count(); ++i) p[i] += p[i] >= 0 ? 0.1f : -0.1f;
  return t;
}

}  // namespace

TEST_CASE("relu forward clamps negatives", "[activation]") {
  Tensor x = tensor_of({2, 3}, {-1.0f, 0.5f, 2.0f, -0.25f, 0.0f, 3.0f});
  Tensor y = run_forward("relu", {}, {x})[0];
  REQUIRE(y.shape() == Shape{2, 3});
  std::vector<float> expected = {0.0f, 0.5f, 2.0f, 0.0f, 0.0f, 3.0f};
  for (int i = 0; i < 6; ++i) CHECK(y.data()[i] == expected[i]);
}

TEST_CASE("sigmoid and tanh forward match the formulas", "[activation]") {
  Tensor x = tensor_of({4}, {-3.0f, -0.5f, 0.0f, 2.0f});
  Tensor s = run_forward("sigmoid", {}, {x})[0];
  Tensor t = run_forward("tanh", {}, {x})[0];
  for (int i = 0; i < 4; ++i) {
    const double v = x.data()[i];
    CHECK(s.data()[i] == Approx(1.0 / (1.0 + std::exp(-v))));
    CHECK(t.data()[i] == Approx(std::tanh(v)));
  }
  CHECK(s.data()[2] == 0.5f);
  CHECK(t.data()[2] == 0.0f);
}

TEST_CASE("activation gradient kernels compute from y and dy", "[activation]") {
  Tensor y = tensor_of({3}, {0.0f, 0.25f, 0.5f});
  Tensor dy = tensor_of({3}, {2.0f, 4.0f, -1.0f});
  Tensor relu = run_forward("relu_grad", {}, {y, dy})[0];
  Tensor sig = run_forward("sigmoid_grad", {}, {y, dy})[0];
  Tensor tnh = run_forward("tanh_grad", {}, {y, dy})[0];
  CHECK(relu.data()[0] == 0.0f);
  CHECK(relu.data()[1] == 4.0f);
  CHECK(relu.data()[2] == -1.0f);
  CHECK(sig.data()[1] == Approx(4.0 * 0.25 * 0.75));
  CHECK(sig.data()[2] == Approx(-0.25));
  CHECK(tnh.data()[0] == Approx(2.0));
  CHECK(tnh.data()[1] == Approx(4.0 * (1 - 0.0625)));
}

TEST_CASE("relu may run in place", "[activation]") {
  Tensor x = tensor_of({4}, {-1.0f, 1.0f, -2.0f, 2.0f});
  auto op = OperatorRegistry::create("relu");
  OpContext context;
  op->compute({&x}, {&x}, context);
  CHECK(x.data()[0] == 0.0f);
  CHECK(x.data()[1] == 1.0f);
  CHECK(x.data()[2] == 0.0f);
  CHECK(x.data()[3] == 2.0f);
}

TEST_CASE("large activations take the threaded path", "[activation]") {
  Rng rng(3);
  Tensor x = away_from_zero({300, 400}, rng);
  Tensor y = run_forward("relu", {}, {x})[0];
  Tensor t = run_forward("tanh", {}, {x})[0];
  for (int64_t i = 0; i < x.count(); i += 997) {
    CHECK(y.data()[i] == std::max(x.data()[i], 0.0f));
    CHECK(t.data()[i] == Approx(std::tanh(x.data()[i])));
  }
}

TEST_CASE("activation gradients pass the numeric check", "[activation]") {
  Rng rng(11);
  check_gradient("relu", {}, {away_from_zero({3, 4, 5}, rng)});
  check_gradient("sigmoid", {}, {random_tensor({3, 4, 5}, rng, -3, 3)});
  check_gradient("tanh", {}, {random_tensor({3, 4, 5}, rng, -2, 2)});
}

TEST_CASE("activation gradient kernels reject mismatched shapes", "[activation]") {
  Tensor y({2, 3});
  Tensor dy({3, 2});
  REQUIRE_THROWS_WITH(run_forward("relu_grad", {}, {y, dy}),
                      Catch::Contains("input 1 (dy) has shape [3,2]") && Catch::Contains("[2,3]"));
  REQUIRE_THROWS_WITH(run_forward("relu", {}, {y, dy}), Catch::Contains("expected 1 input"));
}

TEST_CASE("relu_grad of several dy is relu_grad of their sum in input order, bit for bit",
          "[activation]") {
  Rng rng(5);
  // Small and large (threaded) tensors; y zero or negative in about half the elements.
  for (const Shape& shape : {Shape{7}, Shape{300, 401}}) {
    INFO(shape);
    const Tensor y = run_forward("relu", {}, {random_tensor(shape, rng)})[0];
    std::vector<Tensor> dy;
    for (int k = 0; k < 4; ++k) dy.push_back(random_tensor(shape, rng, -3, 3));
    for (size_t parts = 1; parts <= dy.size(); ++parts) {
      INFO(parts << " parts");
      std::vector<Tensor> inputs{y};
      inputs.insert(inputs.end(), dy.begin(), dy.begin() + static_cast<long>(parts));
      const Tensor summed = run_forward("sum", {}, {dy.begin(), dy.begin() + parts})[0];
      const Tensor expected = run_forward("relu_grad", {}, {y, summed})[0];
      const Tensor dx = run_forward("relu_grad", {}, inputs)[0];
      int masked = 0;
      for (int64_t i = 0; i < dx.count(); ++i) {
        REQUIRE(dx.data()[i] == expected.data()[i]);
        masked += y.data()[i] == 0.0f;
      }
      CHECK(masked > 0);
      CHECK(masked < dx.count());
      // In place, dx in the first part's memory.
      std::vector<Tensor> parts_copy;
      for (size_t k = 0; k < parts; ++k) {
        parts_copy.emplace_back(shape);
        parts_copy.back().copy_from(dy[k]);
      }
      std::vector<const Tensor*> in{&y};
      for (const Tensor& t : parts_copy) in.push_back(&t);
      OpContext context;
      OperatorRegistry::create("relu_grad")->compute(in, {&parts_copy[0]}, context);
      for (int64_t i = 0; i < dx.count(); ++i) REQUIRE(parts_copy[0].data()[i] == dx.data()[i]);
    }
  }
  // (1e8 + 1) - 1e8 is 0 in float, 1 in the other order: the parts are added left to right.
  const Tensor one = tensor_of({1}, {1.0f});
  CHECK(run_forward("relu_grad", {}, {one, tensor_of({1}, {1e8f}), one, tensor_of({1}, {-1e8f})})[0]
            .data()[0] == 0.0f);
}

TEST_CASE("relu_grad names the dy part whose shape is wrong, and wants one", "[activation]") {
  Tensor y({2, 3});
  REQUIRE_THROWS_WITH(run_forward("relu_grad", {}, {y, Tensor({2, 3}), Tensor({3, 2})}),
                      Catch::Contains("input 2 (dy_1) has shape [3,2], expected input 0's (y) "
                                      "shape [2,3]"));
  REQUIRE_THROWS_WITH(run_forward("relu_grad", {}, {y}),
                      Catch::Contains("expected y and at least one dy, got 1 input"));
}
