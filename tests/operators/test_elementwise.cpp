#include <catch2/catch.hpp>
#include <cmath>

#include "operators/registry.hpp"
#include "tests/operators/gradient_test.hpp"

using namespace purine;
using namespace purine::testing;

TEST_CASE("sum adds its inputs", "[elementwise]") {
  Tensor a = tensor_of({2, 2}, {1, 2, 3, 4});
  Tensor b = tensor_of({2, 2}, {10, 20, 30, 40});
  Tensor c = tensor_of({2, 2}, {0.5f, 0.25f, -1, -2});
  Tensor y = run_forward("sum", {}, {a, b, c})[0];
  std::vector<float> expected = {11.5f, 22.25f, 32, 42};
  for (int i = 0; i < 4; ++i) CHECK(y.data()[i] == expected[i]);
  Tensor one = run_forward("sum", {}, {a})[0];
  for (int i = 0; i < 4; ++i) CHECK(one.data()[i] == a.data()[i]);
}

TEST_CASE("sum adds in input order, also in place and on large tensors", "[elementwise]") {
  // (1e8 + 1) - 1e8 rounds to 0 in float; the other order gives 1.
  Tensor a = tensor_of({1}, {1e8f});
  Tensor b = tensor_of({1}, {1.0f});
  Tensor c = tensor_of({1}, {-1e8f});
  CHECK(run_forward("sum", {}, {a, b, c})[0].data()[0] == 0.0f);
  CHECK(run_forward("sum", {}, {a, c, b})[0].data()[0] == 1.0f);

  Rng rng(4);
  std::vector<Tensor> xs = {random_tensor({70, 1000}, rng), random_tensor({70, 1000}, rng),
                            random_tensor({70, 1000}, rng)};
  Tensor y = run_forward("sum", {}, xs)[0];
  for (int64_t i = 0; i < y.count(); i += 333) {
    CHECK(y.data()[i] == (xs[0].data()[i] + xs[1].data()[i]) + xs[2].data()[i]);
  }
  // The output may be any of the inputs.
  Tensor expected_copy({70, 1000});
  expected_copy.copy_from(y);
  auto op = OperatorRegistry::create("sum");
  OpContext context;
  op->compute({&xs[0], &xs[1], &xs[2]}, {&xs[2]}, context);
  for (int64_t i = 0; i < y.count(); ++i) REQUIRE(xs[2].data()[i] == expected_copy.data()[i]);

  // Two inputs take a path of their own; the output may be either of them there too.
  Tensor pair_sum = run_forward("sum", {}, {xs[0], xs[1]})[0];
  for (int64_t i = 0; i < pair_sum.count(); i += 333)
    CHECK(pair_sum.data()[i] == xs[0].data()[i] + xs[1].data()[i]);
  op->compute({&xs[0], &xs[1]}, {&xs[0]}, context);
  for (int64_t i = 0; i < pair_sum.count(); ++i) REQUIRE(xs[0].data()[i] == pair_sum.data()[i]);
}

TEST_CASE("mul and scale by hand", "[elementwise]") {
  Tensor a = tensor_of({3}, {1, -2, 3});
  Tensor b = tensor_of({3}, {4, 5, -0.5f});
  Tensor m = run_forward("mul", {}, {a, b})[0];
  CHECK(m.data()[0] == 4.0f);
  CHECK(m.data()[1] == -10.0f);
  CHECK(m.data()[2] == -1.5f);
  Tensor s = run_forward("scale", Attrs().set("alpha", -2.0), {a})[0];
  CHECK(s.data()[0] == -2.0f);
  CHECK(s.data()[1] == 4.0f);
  CHECK(s.data()[2] == -6.0f);
}

TEST_CASE("elementwise gradients pass the numeric check", "[elementwise]") {
  Rng rng(16);
  check_gradient(
      "sum", {},
      {random_tensor({2, 3}, rng), random_tensor({2, 3}, rng), random_tensor({2, 3}, rng)});
  check_gradient("mul", {}, {random_tensor({3, 4}, rng), random_tensor({3, 4}, rng)});
  check_gradient("scale", Attrs().set("alpha", 0.75), {random_tensor({5}, rng)});
}

TEST_CASE("sum's gradient aliases dy for every input", "[elementwise]") {
  auto sum = OperatorRegistry::create("sum");
  GradientSpec spec = sum->gradient_for({Shape{2}, Shape{2}, Shape{2}});
  CHECK(spec.ops.empty());
  REQUIRE(spec.aliases.size() == 3);
  CHECK(spec.aliases[2] == std::make_pair(2, 0));
  REQUIRE_THROWS_WITH(sum->gradient(), Catch::Contains("call gradient_for()"));
}

TEST_CASE("elementwise ops reject mismatched shapes", "[elementwise]") {
  REQUIRE_THROWS_WITH(run_forward("sum", {}, {Tensor({2, 3}), Tensor({2, 3}), Tensor({3, 2})}),
                      Catch::Contains("input 2 has shape [3,2], expected input 0's shape [2,3]"));
  REQUIRE_THROWS_WITH(run_forward("mul", {}, {Tensor({2}), Tensor({3})}),
                      Catch::Contains("input 1 has shape [3]"));
  REQUIRE_THROWS_WITH(run_forward("sum", {}, {}), Catch::Contains("expected at least one input"));
}

TEST_CASE("sum_relu is relu of sum in input order, bit for bit, also in place", "[elementwise]") {
  Rng rng(8);
  for (const Shape& shape : {Shape{9}, Shape{200, 501}}) {
    INFO(shape);
    std::vector<Tensor> xs;
    for (int k = 0; k < 3; ++k) xs.push_back(random_tensor(shape, rng));
    for (size_t terms = 1; terms <= xs.size(); ++terms) {
      INFO(terms << " terms");
      const std::vector<Tensor> in(xs.begin(), xs.begin() + static_cast<long>(terms));
      const Tensor expected = run_forward("relu", {}, {run_forward("sum", {}, in)[0]})[0];
      const Tensor y = run_forward("sum_relu", {}, in)[0];
      int zeros = 0;
      for (int64_t i = 0; i < y.count(); ++i) {
        REQUIRE(y.data()[i] == expected.data()[i]);
        zeros += y.data()[i] == 0.0f;
      }
      CHECK(zeros > 0);
      CHECK(zeros < y.count());
      // The output in the last input's memory.
      Tensor last(shape);
      last.copy_from(in.back());
      std::vector<const Tensor*> pointers;
      for (size_t k = 0; k + 1 < terms; ++k) pointers.push_back(&in[k]);
      pointers.push_back(&last);
      OpContext context;
      OperatorRegistry::create("sum_relu")->compute(pointers, {&last}, context);
      for (int64_t i = 0; i < y.count(); ++i) REQUIRE(last.data()[i] == y.data()[i]);
    }
  }
  const Tensor a = tensor_of({1}, {1e8f}), b = tensor_of({1}, {1.0f}), c = tensor_of({1}, {-1e8f});
  CHECK(run_forward("sum_relu", {}, {a, b, c})[0].data()[0] == 0.0f);
  CHECK(run_forward("sum_relu", {}, {a, c, b})[0].data()[0] == 1.0f);
}

TEST_CASE("sum_relu's gradient is one relu_grad, which every input's gradient is",
          "[elementwise]") {
  auto op = OperatorRegistry::create("sum_relu");
  const GradientSpec spec = op->gradient_for({Shape{2}, Shape{2}, Shape{2}});
  REQUIRE(spec.ops.size() == 1);
  CHECK(spec.ops[0].type == "relu_grad");
  CHECK(spec.aliases.empty());
  REQUIRE(spec.temp_aliases.size() == 3);
  CHECK(spec.temp_aliases[2] == std::make_pair(2, 0));
  REQUIRE_THROWS_WITH(op->gradient(), Catch::Contains("call gradient_for()"));
  // Values kept away from the kink: no sum within 0.3 of 0.
  Rng rng(9);
  Tensor a = random_tensor({3, 4}, rng), b = random_tensor({3, 4}, rng);
  for (int64_t i = 0; i < a.count(); ++i)
    if (std::abs(a.data()[i] + b.data()[i]) < 0.3f) a.mutable_data()[i] += 0.6f;
  check_gradient("sum_relu", {}, {a, b});
}
