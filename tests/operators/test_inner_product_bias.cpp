// inner_product_bias (operators/inner_product_bias.hpp): on the CPU the unfused kernels in turn,
// bit for bit; its gradient is the unfused ops' gradients and passes the numeric check.
#include <catch2/catch.hpp>

#include "operators/registry.hpp"
#include "tests/operators/gradient_test.hpp"

using namespace purine;
using namespace purine::testing;

TEST_CASE("inner_product_bias gives inner_product then bias (or bias_relu) bit for bit",
          "[inner_product]") {
  Rng rng(31);
  const Tensor x = random_tensor({6, 2, 3, 3}, rng), w = random_tensor({5, 18}, rng);
  const Tensor b = random_tensor({5}, rng);
  const Tensor product = run_forward("inner_product", {}, {x, w})[0];
  for (int64_t relu : {0, 1}) {
    INFO("relu " << relu);
    const Tensor fused = run_forward("inner_product_bias", Attrs().set("relu", relu), {x, w, b})[0];
    const Tensor plain = run_forward(relu ? "bias_relu" : "bias", {}, {product, b})[0];
    CHECK(fused.shape() == Shape{6, 5});
    CHECK(fused.values() == plain.values());
  }
}

TEST_CASE("inner_product_bias's gradient is the unfused ops' and passes the numeric check",
          "[inner_product]") {
  const GradientSpec with_relu =
      OperatorRegistry::create("inner_product_bias", Attrs().set("relu", int64_t{1}))->gradient();
  REQUIRE(with_relu.ops.size() == 3);
  CHECK(with_relu.ops[0].type == "bias_relu_grad");
  CHECK(with_relu.ops[1].type == "inner_product_grad_data");
  CHECK(with_relu.ops[2].type == "inner_product_grad_weight");
  CHECK(OperatorRegistry::create("inner_product_bias")->gradient().ops[0].type == "bias_grad");
  Rng rng(32);
  check_gradient("inner_product_bias", {},
                 {random_tensor({4, 6}, rng), random_tensor({3, 6}, rng), random_tensor({3}, rng)});
  // With the ReLU, every output kept well above its kink (positive operands and bias).
  check_gradient("inner_product_bias", Attrs().set("relu", int64_t{1}),
                 {random_tensor({4, 6}, rng, 0.2f, 1.0f), random_tensor({3, 6}, rng, 0.2f, 1.0f),
                  random_tensor({3}, rng, 0.1f, 0.2f)});
}

TEST_CASE("inner_product_bias refuses a bias of the wrong size and a bad relu", "[inner_product]") {
  Rng rng(33);
  const Tensor x = random_tensor({2, 4}, rng), w = random_tensor({3, 4}, rng);
  REQUIRE_THROWS_WITH(run_forward("inner_product_bias", {}, {x, w, random_tensor({4}, rng)}),
                      Catch::Contains("input 2 (bias) has shape [4], expected [3]"));
  REQUIRE_THROWS_WITH(run_forward("inner_product_bias", {},
                                  {x, random_tensor({3, 5}, rng), random_tensor({3}, rng)}),
                      Catch::Contains("inner_product_bias: input 1 (weight) has 5 columns"));
  REQUIRE_THROWS_WITH(
      OperatorRegistry::create("inner_product_bias", Attrs().set("relu", int64_t{2})),
      Catch::Contains("attribute 'relu' is 2; expected 0 or 1"));
}
