// The public gradient checker (operators/gradient_check.hpp) passes a correct gradient, finds a
// wrong one and names where, and refuses what it cannot check.
#include <catch2/catch.hpp>

#include "base/error.hpp"
#include "operators/gradient_check.hpp"
#include "operators/registry.hpp"
#include "tests/operators/gradient_test.hpp"

namespace purine::testing {
namespace {

// y = x * x, with the gradient 2 x dy or, when `wrong`, x dy (a factor forgotten).
template <bool wrong>
class SquareOp : public Operator {
 public:
  using Operator::Operator;
  std::string type() const override { return wrong ? "test_square_wrong" : "test_square"; }
  int num_inputs() const override { return 1; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override { return in; }
  bool differentiable() const override { return true; }
  GradientSpec gradient() const override {
    GradientSpec spec;
    spec.ops.push_back({"mul", {}, {output_grad(0), input(0)}, {temp(0)}});
    spec.ops.push_back(
        {"scale", Attrs().set("alpha", wrong ? 1.0 : 2.0), {temp(0)}, {input_grad(0)}});
    return spec;
  }

 protected:
  void compute_cpu(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out,
                   OpContext&) override {
    const float* x = in[0]->data();
    float* y = out[0]->mutable_data();
    for (int64_t i = 0; i < in[0]->count(); ++i) y[i] = x[i] * x[i];
  }
};

const bool registered =
    OperatorRegistry::add("test_square",
                          [](const Attrs& a) -> std::unique_ptr<Operator> {
                            return std::make_unique<SquareOp<false>>(a);
                          }) &&
    OperatorRegistry::add("test_square_wrong", [](const Attrs& a) -> std::unique_ptr<Operator> {
      return std::make_unique<SquareOp<true>>(a);
    });

}  // namespace

TEST_CASE("the gradient checker passes a correct gradient", "[operators][gradient_check]") {
  REQUIRE(registered);
  Rng rng(1);
  const GradientCheckResult result =
      check_operator_gradient("test_square", {}, {random_tensor({4, 5}, rng)});
  INFO(result.describe());
  CHECK(result.passed());
  CHECK(result.probes == 20);
  CHECK(result.worst_error < 1e-3);
}

TEST_CASE("the gradient checker finds a wrong gradient and names the element",
          "[operators][gradient_check]") {
  REQUIRE(registered);
  Tensor x = tensor_of({3}, {0.5f, -1.0f, 2.0f});
  const GradientCheckResult result = check_operator_gradient("test_square_wrong", {}, {x});
  CHECK_FALSE(result.passed());
  REQUIRE(result.mismatches.size() == 3);
  // Analytic x * r against numeric 2 x * r: the numeric one is twice the analytic one.
  for (const GradientMismatch& m : result.mismatches) {
    CHECK(m.input == 0);
    CHECK(m.numeric == Approx(2 * m.analytic).epsilon(1e-3));
  }
  CHECK(result.mismatches[1].element == 1);
  CHECK(result.describe().find("test_square_wrong at rank0:cpu: 3 probes, 3 mismatch") !=
        std::string::npos);
}

TEST_CASE("the gradient checker samples large inputs", "[operators][gradient_check]") {
  Rng rng(2);
  GradientCheckOptions options;
  options.max_probes = 10;
  const GradientCheckResult result =
      check_operator_gradient("tanh", {}, {random_tensor({100}, rng)}, options);
  CHECK(result.passed());
  CHECK(result.probes == 10);
}

TEST_CASE("the gradient checker refuses what it cannot check", "[operators][gradient_check]") {
  Rng rng(3);
  CHECK_THROWS_WITH(
      check_operator_gradient("accuracy", {}, {random_tensor({2, 3}, rng), tensor_of({2}, {0, 1})}),
      Catch::Contains("'accuracy' declares no gradient"));
  GradientCheckOptions options;
  options.checked_inputs = {1};
  CHECK_THROWS_WITH(
      check_operator_gradient("softmax_cross_entropy", {},
                              {random_tensor({2, 3}, rng), tensor_of({2}, {0, 1})}, options),
      Catch::Contains("gives no gradient for input 1"));
  options.checked_inputs = {};
  options.location = Location::gpu(7);
  CHECK_THROWS_WITH(check_operator_gradient("relu", {}, {random_tensor({2}, rng)}, options),
                    Catch::Contains("gradient check at rank0:gpu7"));
}

}  // namespace purine::testing
