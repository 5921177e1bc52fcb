// The kernels engine "auto" picks for ImageNet-width convolutions (operators/cpu/
// conv_kernel_choice.cpp): where Winograd's transformed kernels outgrow the caches, 1x1 kernels
// over large planes, and weight gradients between many channels. The kernels' results are
// checked against naive loops in test_conv.cpp; this file checks which one runs.
#include <oneapi/dnnl/dnnl.h>

#include <catch2/catch.hpp>
#include <string>

#include "operators/conv.hpp"
#include "operators/cpu/vector_isa.hpp"
#include "operators/registry.hpp"
#include "tests/operators/gradient_test.hpp"

using namespace purine;
using namespace purine::testing;

namespace {

// The rules under test hold with oneDNN's AVX2 kernels and where Winograd's kernel runs (AVX2 and
// FMA under the ISA cap); elsewhere oneDNN keeps these convolutions.
bool avx2_rules() {
  const bool avx512 =
      (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  return !avx512 && vector_isa() != VectorIsa::kBaseline && __builtin_cpu_supports("fma");
}

struct Conv {
  int64_t n, c, size, o, k, stride;  // square planes and kernels, padding k / 2
};

// The kernel `type` (conv, conv_grad_data or conv_grad_weight) of `g` runs under engine auto.
std::string kernel_of(const char* type, const Conv& g) {
  Rng rng(5);
  const int64_t pad = g.k / 2, out = (g.size + 2 * pad - g.k) / g.stride + 1;
  const Tensor x = random_tensor({g.n, g.c, g.size, g.size}, rng);
  const Tensor w = random_tensor({g.o, g.c, g.k, g.k}, rng);
  const Tensor dy = random_tensor({g.n, g.o, out, out}, rng);
  auto op = OperatorRegistry::create(type, Attrs()
                                               .set("stride_h", g.stride)
                                               .set("stride_w", g.stride)
                                               .set("pad_h", pad)
                                               .set("pad_w", pad));
  const std::string name = type;
  std::vector<const Tensor*> in{&dy, &x, &w};  // conv_grad_weight's
  if (name == "conv") in = {&x, &w};
  if (name == "conv_grad_data") in = {&dy, &w, &x};
  std::vector<Shape> shapes;
  for (const Tensor* t : in) shapes.push_back(t->shape());
  Tensor result(op->output_shapes(shapes)[0]);
  OpContext context;
  op->compute(in, {&result}, context);
  return dynamic_cast<ConvOpBase&>(*op).kernel_name();
}

bool is_winograd(const std::string& kernel) { return kernel.rfind("winograd:", 0) == 0; }

}  // namespace

TEST_CASE("Winograd takes 3x3 convolutions whose transformed kernels fit in 6 MB",
          "[conv][choice]") {
  if (!avx2_rules()) {
    WARN("skipped: the rule holds with oneDNN's AVX2 kernels and Winograd's kernel");
    return;
  }
  // 144 -> 288 channels: 36 x 144 x 288 floats, 6.0 MB; 160 -> 320: 7.4 MB.
  const Conv fits{1, 144, 14, 288, 3, 1}, too_large{1, 160, 14, 320, 3, 1};
  for (const char* type : {"conv", "conv_grad_data"}) {
    INFO(type);
    CHECK(kernel_of(type, fits) == "winograd:F(4x4,3x3)");
    CHECK_FALSE(is_winograd(kernel_of(type, too_large)));
  }
  // ResNet-50's last stage: 512 -> 512 at 7x7, in no direction.
  const Conv last_stage{2, 512, 7, 512, 3, 1};
  for (const char* type : {"conv", "conv_grad_data", "conv_grad_weight"})
    CHECK_FALSE(is_winograd(kernel_of(type, last_stage)));
}

TEST_CASE("1x1 convolutions over 56x56 planes run as one GEMM per image", "[conv][choice]") {
  if (!avx2_rules()) {
    WARN("skipped: the rule holds with oneDNN's AVX2 kernels");
    return;
  }
  const Conv large{1, 64, 56, 64, 1, 1}, smaller{1, 64, 28, 64, 1, 1};
  for (const char* type : {"conv", "conv_grad_data", "conv_grad_weight"}) {
    INFO(type);
    CHECK(kernel_of(type, large) == "im2col");
  }
  CHECK(kernel_of("conv", smaller).rfind("onednn:", 0) == 0);
}

TEST_CASE("weight gradients between many channels leave oneDNN's chunks", "[conv][choice]") {
  if (!avx2_rules()) {
    WARN("skipped: the rule holds with oneDNN's AVX2 kernels");
    return;
  }
  // A strided 3x3 between 128 x 128 channels: im2col; between 64 x 64, oneDNN's chunks still.
  CHECK(kernel_of("conv_grad_weight", {2, 128, 16, 128, 3, 2}) == "im2col");
  CHECK(kernel_of("conv_grad_weight", {2, 64, 16, 64, 3, 2}).rfind("onednn:", 0) == 0);
  // 7x7 output planes: the image groups.
  CHECK(kernel_of("conv_grad_weight", {2, 512, 7, 256, 1, 1}) == "im2col:image groups");
}
