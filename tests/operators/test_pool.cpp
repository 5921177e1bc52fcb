#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "operators/registry.hpp"
#include "tests/operators/gradient_test.hpp"
#include "tests/same_bits.hpp"

using namespace purine;
using namespace purine::testing;

namespace {

// Distinct values i * 0.01 in a shuffled order: no ties, and no pair closer than the numeric
// checker's step can swap.
Tensor distinct_tensor(const Shape& shape, Rng& rng) {
  Tensor t(shape);
  std::vector<float> values(t.count());
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.01f * static_cast<float>(i) - 1.0f;
  for (size_t i = values.size(); i > 1; --i) std::swap(values[i - 1], values[rng.below(i)]);
  std::copy(values.begin(), values.end(), t.mutable_data());
  return t;
}

// Naive pooling of one [H, W] plane; padding never wins a max, avg divides by the kernel area.
std::vector<float> naive_pool(const float* x, int64_t h, int64_t w, int64_t k, int64_t s, int64_t p,
                              bool max) {
  const int64_t ho = (h + 2 * p - k) / s + 1, wo = (w + 2 * p - k) / s + 1;
  std::vector<float> y;
  for (int64_t oh = 0; oh < ho; ++oh) {
    for (int64_t ow = 0; ow < wo; ++ow) {
      float m = -std::numeric_limits<float>::infinity();
      double sum = 0;
      for (int64_t i = oh * s - p; i < oh * s - p + k; ++i) {
        for (int64_t j = ow * s - p; j < ow * s - p + k; ++j) {
          if (i < 0 || i >= h || j < 0 || j >= w) continue;
          m = std::max(m, x[i * w + j]);
          sum += x[i * w + j];
        }
      }
      y.push_back(max ? m : static_cast<float>(sum / (k * k)));
    }
  }
  return y;
}

Attrs pool_attrs(const char* mode, int64_t kernel, int64_t stride, int64_t pad) {
  return Attrs().set("mode", mode).set("kernel", kernel).set("stride", stride).set("pad", pad);
}

}  // namespace

TEST_CASE("pool max 2x2 picks each window's maximum", "[pool]") {
  Tensor x = tensor_of({1, 1, 4, 4}, {1, 5, 2, 0,    //
                                      3, 4, 8, 1,    //
                                      -1, -2, 6, 7,  //
                                      -3, -4, 9, 2});
  Tensor y = run_forward("pool", Attrs().set("mode", "max").set("kernel", 2), {x})[0];
  REQUIRE(y.shape() == Shape{1, 1, 2, 2});
  CHECK(y.data()[0] == 5.0f);
  CHECK(y.data()[1] == 8.0f);
  CHECK(y.data()[2] == -1.0f);
  CHECK(y.data()[3] == 9.0f);
}

TEST_CASE("pool avg with padding divides by the full kernel area", "[pool]") {
  Tensor x = tensor_of({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor y = run_forward("pool", pool_attrs("avg", 3, 2, 1), {x})[0];
  REQUIRE(y.shape() == Shape{1, 1, 2, 2});
  CHECK(y.data()[0] == Approx(12.0 / 9));  // 1 + 2 + 4 + 5, padding counted
  CHECK(y.data()[1] == Approx(16.0 / 9));
  CHECK(y.data()[2] == Approx(24.0 / 9));
  CHECK(y.data()[3] == Approx(28.0 / 9));
}

TEST_CASE("pool output size rounds down and matches naive loops", "[pool]") {
  Rng rng(51);
  struct Case {
    int64_t h, w, k, s, p;
  };
  for (Case c :
       {Case{5, 5, 2, 2, 0}, Case{7, 6, 3, 2, 1}, Case{6, 6, 3, 1, 0}, Case{9, 8, 3, 3, 2}}) {
    for (const char* mode : {"max", "avg"}) {
      INFO(mode << " " << c.h << "x" << c.w << " kernel " << c.k << " stride " << c.s << " pad "
                << c.p);
      Tensor x = random_tensor({2, 3, c.h, c.w}, rng);
      Tensor y = run_forward("pool", pool_attrs(mode, c.k, c.s, c.p), {x})[0];
      const int64_t ho = (c.h + 2 * c.p - c.k) / c.s + 1, wo = (c.w + 2 * c.p - c.k) / c.s + 1;
      REQUIRE(y.shape() == Shape{2, 3, ho, wo});
      for (int64_t plane = 0; plane < 6; ++plane) {
        std::vector<float> expected = naive_pool(x.data() + plane * c.h * c.w, c.h, c.w, c.k, c.s,
                                                 c.p, std::string(mode) == "max");
        for (int64_t i = 0; i < ho * wo; ++i) {
          CHECK(y.data()[plane * ho * wo + i] == Approx(expected[i]).margin(1e-6));
        }
      }
    }
  }
}

TEST_CASE("pool_grad routes a max gradient to the first maximum", "[pool]") {
  Tensor x = tensor_of({1, 1, 2, 4}, {1, 3, 2, 2,  //
                                      3, 0, 2, 2});
  Tensor y = tensor_of({1, 1, 1, 2}, {3, 2});
  Tensor dy = tensor_of({1, 1, 1, 2}, {10, 20});
  // The 2x2 fast path, and the same windows through the general loops.
  for (const Attrs& attrs :
       {Attrs().set("kernel", 2), Attrs().set("kernel", 2).set("stride_h", 1).set("stride_w", 2)}) {
    Tensor dx = run_forward("pool_grad", attrs, {x, y, dy})[0];
    std::vector<float> expected = {0, 10, 20, 0, 0, 0, 0, 0};
    for (int i = 0; i < 8; ++i) CHECK(dx.data()[i] == expected[i]);
  }
  // Overlapping windows (3x3, stride 1) add up at a shared maximum.
  Tensor x3 = tensor_of({1, 1, 3, 4}, {0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0});
  Tensor dy3 = tensor_of({1, 1, 1, 2}, {1, 2});
  Tensor y3 = run_forward("pool", Attrs().set("kernel", 3).set("stride", 1), {x3})[0];
  Tensor dx3 =
      run_forward("pool_grad", Attrs().set("kernel", 3).set("stride", 1), {x3, y3, dy3})[0];
  CHECK(dx3.data()[5] == 3.0f);
}

TEST_CASE("every pooling path equals plane by plane, window by window, bit for bit",
          "[pool][determinism][isa]") {
  // Planes of up to 4,096 pixels are pooled in blocks of 16, 8 or 4 (operators/cpu/
  // pool_lanes.hpp; ctest reruns this under AVX2 and SSE4.1 caps), all but max 2x2 stride 2,
  // which goes row by row, and larger planes one by one; the reference below goes plane by plane,
  // window by window in row-major order: max keeps the first maximum (a later value wins only
  // when greater, so a NaN wins only first), avg sums from zero and then scales. Values with
  // ties, signed zeros and NaNs; plane counts that leave a partial block; planes of 1, 2, 4, 8
  // and 16 pixels (a block's planes lie packed in as many vectors) and of 49 and 784 (transposed
  // 16, 8 or 4 pixels at a time, the rest one by one).
  struct Case {
    int64_t n, c, h, w, k, s, p;
  };
  Rng rng(54);
  for (const char* mode : {"max", "avg"}) {
    const bool max = std::string(mode) == "max";
    for (Case g :
         {Case{2, 11, 4, 4, 3, 1, 1}, Case{3, 7, 2, 2, 3, 1, 1}, Case{1, 9, 1, 1, 3, 1, 1},
          Case{2, 5, 7, 7, 3, 2, 0}, Case{1, 3, 9, 8, 3, 3, 2}, Case{4, 3, 5, 5, 2, 2, 0},
          Case{2, 3, 28, 27, 2, 2, 0}, Case{1, 2, 70, 70, 3, 2, 1}, Case{3, 11, 4, 4, 3, 1, 1},
          Case{5, 7, 2, 2, 3, 1, 1}, Case{4, 9, 1, 1, 3, 1, 1}, Case{2, 17, 1, 2, 3, 1, 1},
          Case{2, 17, 2, 4, 3, 1, 1}, Case{3, 6, 7, 7, 3, 2, 1}, Case{1, 17, 28, 28, 3, 1, 1}}) {
      INFO(mode << " " << g.n << "x" << g.c << "x" << g.h << "x" << g.w << " kernel " << g.k
                << " stride " << g.s << " pad " << g.p);
      Tensor x({g.n, g.c, g.h, g.w});
      const float values[] = {0.0f, -0.0f, 1.0f,
                              2.0f, -1.0f, std::numeric_limits<float>::quiet_NaN()};
      // avg: magnitudes far apart too, so that a sum in another order rounds differently.
      for (int64_t i = 0; i < x.count(); ++i)
        x.mutable_data()[i] =
            values[rng.below(6)] +
            (max ? 0.0f : rng.uniform(-1.0f, 1.0f) * (rng.below(2) ? 1e4f : 1.0f));
      const int64_t ho = (g.h + 2 * g.p - g.k) / g.s + 1, wo = (g.w + 2 * g.p - g.k) / g.s + 1;
      Tensor dy = random_tensor({g.n, g.c, ho, wo}, rng);
      const float inv_area = 1.0f / static_cast<float>(g.k * g.k);
      std::vector<float> y_ref, dx_ref(x.count(), 0.0f);
      for (int64_t plane = 0; plane < g.n * g.c; ++plane) {
        const float* xp = x.data() + plane * g.h * g.w;
        float* dxp = dx_ref.data() + plane * g.h * g.w;
        for (int64_t oh = 0; oh < ho; ++oh) {
          for (int64_t ow = 0; ow < wo; ++ow) {
            const float grad = dy.data()[(plane * ho + oh) * wo + ow];
            int64_t best = -1;
            float sum = 0.0f;
            for (int64_t i = std::max<int64_t>(oh * g.s - g.p, 0);
                 i < std::min(oh * g.s - g.p + g.k, g.h); ++i)
              for (int64_t j = std::max<int64_t>(ow * g.s - g.p, 0);
                   j < std::min(ow * g.s - g.p + g.k, g.w); ++j) {
                if (best < 0 || xp[i * g.w + j] > xp[best]) best = i * g.w + j;
                sum += xp[i * g.w + j];
                if (!max) dxp[i * g.w + j] += grad * inv_area;
              }
            y_ref.push_back(max ? xp[best] : sum * inv_area);
            if (max) dxp[best] += grad;
          }
        }
      }
      const Attrs attrs = pool_attrs(mode, g.k, g.s, g.p);
      Tensor y = run_forward("pool", attrs, {x})[0];
      Tensor dx = run_forward("pool_grad", attrs, {x, y, dy})[0];
      REQUIRE(y.count() == static_cast<int64_t>(y_ref.size()));
      CHECK(std::memcmp(y.data(), y_ref.data(), sizeof(float) * y_ref.size()) == 0);
      CHECK(std::memcmp(dx.data(), dx_ref.data(), sizeof(float) * dx_ref.size()) == 0);
    }
  }
}

TEST_CASE("pool gradient passes the numeric check", "[pool]") {
  Rng rng(52);
  check_gradient("pool", pool_attrs("max", 2, 2, 0), {distinct_tensor({2, 2, 5, 5}, rng)});
  check_gradient("pool", pool_attrs("max", 3, 2, 1), {distinct_tensor({1, 2, 6, 5}, rng)});
  check_gradient("pool", pool_attrs("avg", 3, 2, 1), {random_tensor({1, 2, 6, 5}, rng)});
  check_gradient("pool", pool_attrs("avg", 2, 2, 0), {random_tensor({2, 1, 4, 4}, rng)});
}

TEST_CASE("pool on a large tensor takes the threaded path", "[pool]") {
  Rng rng(53);
  Tensor x = random_tensor({8, 16, 28, 28}, rng);
  Tensor y = run_forward("pool", Attrs().set("kernel", 2), {x})[0];
  REQUIRE(y.shape() == Shape{8, 16, 14, 14});
  for (int64_t plane = 0; plane < 128; plane += 13) {
    std::vector<float> expected = naive_pool(x.data() + plane * 784, 28, 28, 2, 2, 0, true);
    for (int64_t i = 0; i < 196; ++i) CHECK(y.data()[plane * 196 + i] == expected[i]);
  }
}

TEST_CASE("pool rejects bad shapes and attributes", "[pool]") {
  Rng rng(54);
  Tensor x = random_tensor({1, 2, 4, 4}, rng);
  REQUIRE_THROWS_WITH(
      run_forward("pool", pool_attrs("max", 2, 2, 2), {x}),
      Catch::Contains("pad is 2x2, expected 0 or more and less than the kernel 2x2"));
  REQUIRE_THROWS_WITH(run_forward("pool", pool_attrs("sum", 2, 2, 0), {x}),
                      Catch::Contains("mode is 'sum', expected 'max' or 'avg'"));
  REQUIRE_THROWS_WITH(run_forward("pool", Attrs().set("mode", "max"), {x}),
                      Catch::Contains("missing attribute 'kernel'"));
  REQUIRE_THROWS_WITH(
      run_forward("pool", Attrs().set("kernel", 2), {random_tensor({2, 4, 4}, rng)}),
      Catch::Contains("input 0 (x) has shape [2,4,4], expected [N, C, H, W]"));
  REQUIRE_THROWS_WITH(run_forward("pool", Attrs().set("kernel", 5), {x}),
                      Catch::Contains("kernel 5x5 is larger than the padded input 4x4"));
}

namespace {

// A pooling's attributes, for the tests of channel blocks.
struct Case {
  const char* mode;
  int64_t kernel, stride, pad;
  Attrs attrs() const {
    return Attrs().set("mode", mode).set("kernel", kernel).set("stride", stride).set("pad", pad);
  }
};

}  // namespace

TEST_CASE("pooling in channel blocks gives the plain kernels' bits", "[pool][isa]") {
  // Disjoint 2x2 windows (odd sizes leave a row and a column out), overlapping padded windows
  // both ways, and a global average.
  for (const Case& c : {Case{"max", 2, 2, 0}, Case{"max", 3, 1, 1}, Case{"max", 3, 2, 1},
                        Case{"avg", 3, 2, 1}, Case{"avg", 7, 7, 0}}) {
    for (int block : {8, 16}) {
      INFO(c.mode << " " << c.kernel << "x" << c.kernel << " stride " << c.stride << " pad "
                  << c.pad << ", blocks of " << block);
      Rng rng(81);
      const Shape shape{3, 32, 7, 7};
      // Small integers: windows with ties, where the first maximum must take the gradient.
      Tensor x(shape);
      std::vector<float> values(static_cast<size_t>(shape.count()));
      for (float& v : values) v = static_cast<float>(static_cast<int>(rng.uniform(0, 4)));
      // NaNs: first in a window (kept as its maximum) and later in one (never greater).
      values[0] = values[7 * 7 * 5 + 10] = std::nanf("");
      x.set_values(values);
      const Attrs attrs = c.attrs();
      const Tensor y = run_forward("pool", attrs, {x})[0];
      int blocked = 0;
      const Tensor got = run_forward_blocked("pool", attrs, {x}, block, &blocked)[0];
      CHECK(blocked == 2);
      const std::vector<float> y_values = y.values(), got_values = got.values();
      CHECK(std::memcmp(y_values.data(), got_values.data(), sizeof(float) * y_values.size()) == 0);
      Tensor dy = random_tensor(y.shape(), rng);
      std::vector<float> dy_values = dy.values();
      dy_values[3] = -0.0f;  // a first maximum's -0 adds into +0
      dy.set_values(dy_values);
      const Tensor dx = run_forward("pool_grad", attrs, {x, y, dy})[0];
      const Tensor got_dx = run_forward_blocked("pool_grad", attrs, {x, y, dy}, block, &blocked)[0];
      CHECK(blocked == 3);  // x, dy and dx
      const std::vector<float> expected = dx.values(), actual = got_dx.values();
      CHECK(std::memcmp(expected.data(), actual.data(), sizeof(float) * expected.size()) == 0);
    }
  }
}

namespace {

// `t`'s values in a tensor of its shape, in channel blocks of `block` (0: plain).
Tensor in_layout(const Tensor& t, int block) {
  Tensor out(t.shape());
  if (block > 0) out.set_channel_block(block);
  out.copy_from(t);
  return out;
}

// Runs `type` on `inputs` into outputs of `shapes`, the arguments in blocks of `block` where
// `blocked` (inputs, then outputs) says so.
std::vector<Tensor> run_in_layouts(const char* type, const Attrs& attrs,
                                   const std::vector<Tensor>& inputs,
                                   const std::vector<Shape>& shapes, int block,
                                   const std::vector<bool>& blocked) {
  auto op = OperatorRegistry::create(type, attrs);
  std::vector<Tensor> in, out;
  for (size_t i = 0; i < inputs.size(); ++i)
    in.push_back(in_layout(inputs[i], blocked[i] ? block : 0));
  for (size_t i = 0; i < shapes.size(); ++i) {
    out.emplace_back(shapes[i]);
    if (blocked[inputs.size() + i]) out.back().set_channel_block(block);
  }
  std::vector<const Tensor*> in_ptrs;
  std::vector<Tensor*> out_ptrs;
  for (const Tensor& t : in) in_ptrs.push_back(&t);
  for (Tensor& t : out) out_ptrs.push_back(&t);
  OpContext context;
  op->compute(in_ptrs, out_ptrs, context);
  return out;
}

}  // namespace

TEST_CASE("pooling with some tensors in channel blocks and others plain gives the plain bits",
          "[pool][isa]") {
  for (const Case& c : {Case{"max", 2, 2, 0}, Case{"max", 3, 1, 1}, Case{"avg", 3, 2, 1}}) {
    for (int block : {8, 16}) {
      INFO(c.mode << " " << c.kernel << "x" << c.kernel << " stride " << c.stride << ", blocks of "
                  << block);
      Rng rng(82);
      const Tensor x = random_tensor({2, 32, 6, 6}, rng);
      const Attrs attrs = c.attrs();
      const Tensor y = run_forward("pool", attrs, {x})[0];
      const Tensor dy = random_tensor(y.shape(), rng);
      const Tensor dx = run_forward("pool_grad", attrs, {x, y, dy})[0];
      for (int mask = 1; mask < 8; ++mask) {  // x, dy and dx (x and y forward): some blocked
        const bool bx = mask & 1, bdy = mask & 2, bdx = mask & 4;
        INFO("x " << bx << ", dy " << bdy << ", dx " << bdx);
        if (mask < 4) {
          CHECK(same_bits(run_in_layouts("pool", attrs, {x}, {y.shape()}, block, {bx, bdy})[0], y));
        }
        CHECK(same_bits(run_in_layouts("pool_grad", attrs, {x, y, dy}, {x.shape()}, block,
                                       {bx, false, bdy, bdx})[0],
                        dx));
      }
    }
  }
}
