// The max-pooling GPU kernels (operators/cuda/max_pool.cu) against the CPU kernel bit for bit,
// forward and gradient, on inputs full of ties (small integers and zeros of either sign: the
// first maximum of a window must win on both) and on random ones, for GoogLeNet's geometries, a
// non-square odd one, a large batch, and a window too large for the tiled gradient (the
// fallback). Skipped, saying so, without a GPU.
#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu_test.hpp"
#include "operators/registry.hpp"
#include "random_tensors.hpp"

namespace purine::testing {
namespace {

// How many elements of a and b differ in their bits (all of them if the shapes differ).
int64_t differing_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return a.count() + b.count();
  int64_t differ = 0;
  for (int64_t i = 0; i < a.count(); ++i)
    differ += std::memcmp(a.data() + i, b.data() + i, sizeof(float)) != 0;
  return differ;
}

// pool and pool_grad with `attrs` on x, GPU against CPU.
void check_max_pool(const Attrs& attrs, const Tensor& x, std::mt19937& gen) {
  const Tensor y = op_output("pool", attrs, {x}, false);
  CHECK(differing_bits(op_output("pool", attrs, {x}, true), y) == 0);
  const Tensor dy = random_tensor(y.shape(), gen);
  const Tensor dx = op_output("pool_grad", attrs, {x, y, dy}, false);
  CHECK(differing_bits(op_output("pool_grad", attrs, {x, y, dy}, true), dx) == 0);
}

Attrs max_pool(int64_t kernel, int64_t stride, int64_t pad) {
  return Attrs()
      .set("mode", std::string("max"))
      .set("kernel", kernel)
      .set("stride", stride)
      .set("pad", pad);
}

}  // namespace

TEST_CASE("GPU max pooling matches the CPU bit for bit on ties and random inputs", "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  std::mt19937 gen(12);
  struct Case {
    Shape x;
    Attrs attrs;
    const char* what;
  };
  const std::vector<Case> cases{
      {{4, 16, 112, 112}, max_pool(3, 2, 1), "GoogLeNet pool1: 3x3 stride 2 pad 1"},
      {{4, 24, 28, 28}, max_pool(3, 1, 1), "inception pooling: 3x3 stride 1 pad 1"},
      {{8, 32, 14, 14}, max_pool(3, 2, 1), "3x3 stride 2 pad 1 on 14x14"},
      {{4, 16, 56, 56}, max_pool(2, 2, 0), "2x2 stride 2"},
      {{3, 5, 57, 33}, max_pool(2, 2, 0), "2x2 stride 2, odd sizes"},
      {{3, 7, 13, 11}, max_pool(3, 2, 0), "3x3 stride 2 on 13x11"},
      {{2, 3, 25, 19},
       Attrs()
           .set("mode", std::string("max"))
           .set("kernel_h", int64_t{5})
           .set("kernel_w", int64_t{4})
           .set("stride_h", int64_t{3})
           .set("stride_w", int64_t{2})
           .set("pad_h", int64_t{2})
           .set("pad_w", int64_t{1}),
       "5x4 stride 3x2 pad 2x1"},
      {{3, 4, 20, 20}, max_pool(1, 3, 0), "1x1 stride 3 (elements in no window)"},
      {{2, 3, 240, 240}, max_pool(60, 60, 0), "60x60 stride 60 (the untiled fallback)"},
      {{128, 520, 7, 7}, max_pool(3, 1, 1), "N * C >= 65,536 planes"},
  };
  for (const Case& c : cases) {
    INFO(c.what << ", x " << c.x);
    check_max_pool(c.attrs, tied_tensor(c.x, gen), gen);
    check_max_pool(c.attrs, random_tensor(c.x, gen), gen);
  }
}
}  // namespace purine::testing
