#include <catch2/catch.hpp>

#include "operators/registry.hpp"
#include "tests/operators/gradient_test.hpp"
#include "tests/same_bits.hpp"

using namespace purine;
using namespace purine::testing;

namespace {

// Element (i, j, k) of a contiguous 3-d tensor.
float at(const Tensor& t, int64_t i, int64_t j, int64_t k) {
  const Shape& s = t.shape();
  return t.data()[(i * s[1] + j) * s[2] + k];
}

// Checks that `whole` is the concatenation of `parts` along `axis` (3-d tensors).
void check_concatenation(const Tensor& whole, const std::vector<Tensor>& parts, int axis) {
  int64_t begin = 0;
  for (const Tensor& p : parts) {
    const Shape& s = p.shape();
    for (int64_t i = 0; i < s[0]; ++i) {
      for (int64_t j = 0; j < s[1]; ++j) {
        for (int64_t k = 0; k < s[2]; ++k) {
          int64_t idx[3] = {i, j, k};
          idx[axis] += begin;
          REQUIRE(at(whole, idx[0], idx[1], idx[2]) == at(p, i, j, k));
        }
      }
    }
    begin += s[axis];
  }
}

}  // namespace

TEST_CASE("concat along the channels by hand", "[concat_split]") {
  Tensor a = tensor_of({2, 1, 2}, {1, 2, 3, 4});
  Tensor b = tensor_of({2, 2, 2}, {5, 6, 7, 8, 9, 10, 11, 12});
  Tensor y = run_forward("concat", {}, {a, b})[0];
  REQUIRE(y.shape() == Shape{2, 3, 2});
  std::vector<float> expected = {1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12};
  for (int i = 0; i < 12; ++i) CHECK(y.data()[i] == expected[i]);
}

TEST_CASE("concat along every axis matches the naive reference", "[concat_split]") {
  Rng rng(1);
  for (int axis = 0; axis < 3; ++axis) {
    Shape s1{2, 3, 4}, s2{2, 3, 4}, s3{2, 3, 4};
    s1[axis] = 1;
    s2[axis] = 2;
    s3[axis] = 3;
    std::vector<Tensor> parts = {random_tensor(s1, rng), random_tensor(s2, rng),
                                 random_tensor(s3, rng)};
    Tensor y = run_forward("concat", Attrs().set("axis", axis), parts)[0];
    check_concatenation(y, parts, axis);
    // The inverse: split gives the parts back.
    std::vector<Tensor> back = run_forward(
        "split", Attrs().set("axis", axis).set("sizes", std::vector<int64_t>{1, 2, 3}), {y});
    REQUIRE(back.size() == 3);
    for (int k = 0; k < 3; ++k) {
      REQUIRE(back[k].shape() == parts[k].shape());
      for (int64_t i = 0; i < parts[k].count(); ++i) {
        REQUIRE(back[k].data()[i] == parts[k].data()[i]);
      }
    }
  }
}

TEST_CASE("concat and split accept strided views", "[concat_split]") {
  Rng rng(2);
  Tensor big = random_tensor({2, 5, 3}, rng);
  Tensor middle = big.slice(1, 1, 3);  // [2,2,3], strided
  Tensor other = random_tensor({2, 1, 3}, rng);
  auto concat = OperatorRegistry::create("concat");
  Tensor y({2, 3, 3});
  OpContext context;
  concat->compute({&middle, &other}, {&y}, context);
  Tensor contiguous_middle({2, 2, 3});
  contiguous_middle.copy_from(middle);
  check_concatenation(y, {contiguous_middle, other}, 1);

  // split into a view of a bigger buffer
  auto split = OperatorRegistry::create("split", Attrs().set("sizes", std::vector<int64_t>{2, 1}));
  Tensor target({2, 4, 3});
  Tensor first = target.slice(1, 2, 4);
  Tensor second({2, 1, 3});
  split->compute({&y}, {&first, &second}, context);
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 2; ++j) {
      for (int64_t k = 0; k < 3; ++k) CHECK(at(target, i, j + 2, k) == at(y, i, j, k));
    }
  }
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t k = 0; k < 3; ++k) CHECK(at(second, i, 0, k) == at(y, i, 2, k));
  }
}

TEST_CASE("large concat takes the threaded path", "[concat_split]") {
  Rng rng(3);
  std::vector<Tensor> parts = {random_tensor({64, 16, 40}, rng), random_tensor({64, 32, 40}, rng)};
  Tensor y = run_forward("concat", {}, parts)[0];
  check_concatenation(y, parts, 1);
}

TEST_CASE("a long concat and split along the first axis are copied in pieces, parts straddled",
          "[concat_split]") {
  // Rows of 1, 40,000, 70,001 and 33,000 floats: 32K-float pieces start inside parts and end
  // in the next ones, and the 1-float part lies inside the first piece.
  Rng rng(4);
  const std::vector<Tensor> flat = {
      random_tensor({1, 1, 1}, rng), random_tensor({40000, 1, 1}, rng),
      random_tensor({70001, 1, 1}, rng), random_tensor({33000, 1, 1}, rng)};
  Tensor y = run_forward("concat", Attrs().set("axis", int64_t{0}), flat)[0];
  check_concatenation(y, flat, 0);
  std::vector<int64_t> sizes;
  for (const Tensor& t : flat) sizes.push_back(t.shape()[0]);
  const std::vector<Tensor> back =
      run_forward("split", Attrs().set("axis", int64_t{0}).set("sizes", sizes), {y});
  REQUIRE(back.size() == flat.size());
  for (size_t k = 0; k < flat.size(); ++k) CHECK(back[k].values() == flat[k].values());
}

TEST_CASE("concat and split gradients pass the numeric check", "[concat_split]") {
  Rng rng(15);
  check_gradient("concat", {}, {random_tensor({2, 2, 3}, rng), random_tensor({2, 3, 3}, rng)});
  check_gradient(
      "concat", Attrs().set("axis", 0),
      {random_tensor({1, 3}, rng), random_tensor({2, 3}, rng), random_tensor({3, 3}, rng)});
  check_gradient("split", Attrs().set("axis", -1).set("sizes", std::vector<int64_t>{1, 3}),
                 {random_tensor({3, 2, 4}, rng)});
}

TEST_CASE("concat's gradient splits dy by the inputs' extents", "[concat_split]") {
  auto concat = OperatorRegistry::create("concat", Attrs().set("axis", -1));
  GradientSpec spec = concat->gradient_for({Shape{2, 3}, Shape{2, 5}});
  REQUIRE(spec.ops.size() == 1);
  CHECK(spec.ops[0].type == "split");
  CHECK(spec.ops[0].attrs.get_ints("sizes") == std::vector<int64_t>{3, 5});
  CHECK(spec.ops[0].attrs.get_int("axis") == -1);
  REQUIRE(spec.ops[0].outputs.size() == 2);
  CHECK(spec.ops[0].outputs[1].kind == GradRef::kInputGrad);
  CHECK(spec.ops[0].outputs[1].index == 1);
  REQUIRE_THROWS_WITH(concat->gradient(), Catch::Contains("call gradient_for()"));
}

TEST_CASE("split's gradient is a concat of the output gradients", "[concat_split]") {
  auto split = OperatorRegistry::create(
      "split", Attrs().set("axis", 0).set("sizes", std::vector<int64_t>{1, 2}));
  GradientSpec spec = split->gradient();
  REQUIRE(spec.ops.size() == 1);
  CHECK(spec.ops[0].type == "concat");
  REQUIRE(spec.ops[0].inputs.size() == 2);
  CHECK(spec.ops[0].inputs[1].kind == GradRef::kOutputGrad);
  CHECK(spec.ops[0].inputs[1].index == 1);
}

TEST_CASE("concat and split reject bad shapes", "[concat_split]") {
  REQUIRE_THROWS_WITH(run_forward("concat", {}, {Tensor({2, 3, 4}), Tensor({2, 3, 5})}),
                      Catch::Contains("input 1 has shape [2,3,5] but input 0 has [2,3,4]"));
  REQUIRE_THROWS_WITH(run_forward("concat", {}, {Tensor({2, 3}), Tensor({2, 3, 1})}),
                      Catch::Contains("input 1 has shape [2,3,1] but input 0 has [2,3]"));
  REQUIRE_THROWS_WITH(
      run_forward("split", Attrs().set("sizes", std::vector<int64_t>{1, 1}), {Tensor({2, 3})}),
      Catch::Contains("'sizes' sums to 2") && Catch::Contains("extent 3"));
  REQUIRE_THROWS_WITH(OperatorRegistry::create("split"),
                      Catch::Contains("missing attribute 'sizes'"));
}

TEST_CASE("concat and split along the channels in channel blocks copy the plain bits",
          "[concat_split]") {
  Rng rng(31);
  for (int block : {8, 16}) {
    INFO("blocks of " << block);
    const Tensor a = random_tensor({3, 2 * block, 5, 5}, rng);
    const Tensor b = random_tensor({3, block, 5, 5}, rng);
    int blocked = 0;
    const Tensor joined = run_forward("concat", {}, {a, b})[0];
    CHECK(same_bits(run_forward_blocked("concat", {}, {a, b}, block, &blocked)[0], joined));
    CHECK(blocked == 3);
    const Attrs sizes = Attrs().set("sizes", std::vector<int64_t>{block, 2 * block});
    const auto parts = run_forward("split", sizes, {joined});
    const auto got = run_forward_blocked("split", sizes, {joined}, block, &blocked);
    CHECK(blocked == 3);
    for (size_t k = 0; k < parts.size(); ++k) CHECK(same_bits(got[k], parts[k]));
  }
}

TEST_CASE("concat and split take channel blocks only along whole blocks of several images",
          "[concat_split]") {
  const auto takes = [](const char* type, const Attrs& attrs, const std::vector<Shape>& shapes) {
    return OperatorRegistry::create(type, attrs)->channel_blocking(shapes, 16).kind !=
           ChannelBlocking::kNone;
  };
  const Shape a{4, 32, 3, 3}, b{4, 16, 3, 3};
  CHECK(takes("concat", {}, {a, b}));
  CHECK(takes("concat", Attrs().set("axis", -3), {a, b}));
  CHECK_FALSE(takes("concat", {}, {a, Shape{4, 8, 3, 3}}));  // a part of half a block
  CHECK_FALSE(takes("concat", Attrs().set("axis", 0), {a, a}));
  CHECK_FALSE(takes("concat", {}, {Shape{1, 32, 3, 3}, Shape{1, 16, 3, 3}}));  // views instead
  CHECK_FALSE(takes("concat", {}, {Shape{4, 32}, Shape{4, 16}}));
  const Attrs sizes = Attrs().set("sizes", std::vector<int64_t>{16, 32});
  CHECK(takes("split", sizes, {Shape{4, 48, 3, 3}}));
  CHECK_FALSE(
      takes("split", Attrs().set("sizes", std::vector<int64_t>{8, 40}), {Shape{4, 48, 3, 3}}));
}
