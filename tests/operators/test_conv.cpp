#include <malloc.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <memory>

#include "operators/conv.hpp"
#include "operators/cpu/vector_isa.hpp"
#include "operators/kernel_determinism.hpp"
#include "operators/registry.hpp"
#include "tests/operators/gradient_test.hpp"
#include "tests/same_bits.hpp"

using namespace purine;
using namespace purine::testing;

namespace {

struct Geometry {
  int64_t n, c, h, w, o, kh, kw, stride_h, stride_w, pad_h, pad_w;
  int64_t ho() const { return (h + 2 * pad_h - kh) / stride_h + 1; }
  int64_t wo() const { return (w + 2 * pad_w - kw) / stride_w + 1; }
  Attrs attrs(const char* engine = "auto") const {
    Attrs a;
    a.set("stride_h", stride_h).set("stride_w", stride_w).set("pad_h", pad_h).set("pad_w", pad_w);
    return a.set("engine", engine);
  }
};

// Calls f(i, j, k, l, x_offset, w_offset, y_offset) for every multiply-add of the convolution.
template <typename F>
void for_each_tap(const Geometry& g, F f) {
  for (int64_t i = 0; i < g.n; ++i)
    for (int64_t o = 0; o < g.o; ++o)
      for (int64_t oh = 0; oh < g.ho(); ++oh)
        for (int64_t ow = 0; ow < g.wo(); ++ow)
          for (int64_t c = 0; c < g.c; ++c)
            for (int64_t ki = 0; ki < g.kh; ++ki)
              for (int64_t kj = 0; kj < g.kw; ++kj) {
                const int64_t ih = oh * g.stride_h - g.pad_h + ki;
                const int64_t iw = ow * g.stride_w - g.pad_w + kj;
                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                f(((i * g.c + c) * g.h + ih) * g.w + iw, ((o * g.c + c) * g.kh + ki) * g.kw + kj,
                  ((i * g.o + o) * g.ho() + oh) * g.wo() + ow);
              }
}

// dw of the convolution, summed in double.
std::vector<double> naive_weight_gradient(const Geometry& g, const Tensor& dy, const Tensor& x) {
  std::vector<double> dw(g.o * g.c * g.kh * g.kw, 0.0);
  for_each_tap(g, [&](int64_t xi, int64_t wi, int64_t yi) {
    dw[wi] += double{dy.data()[yi]} * x.data()[xi];
  });
  return dw;
}

void check_close(const Tensor& got, const std::vector<double>& expected, double tolerance) {
  REQUIRE(got.count() == static_cast<int64_t>(expected.size()));
  for (int64_t i = 0; i < got.count(); ++i) {
    INFO("element " << i);
    CHECK(got.data()[i] == Approx(expected[i]).margin(tolerance));
  }
}

// check_against_naive's margin for Winograd's 6x6 tiles, F(2x2, 5x5) and F(4x4, 3x3): their
// transforms multiply by up to 5 and 8 and cancel, errors of 1e-5 of the sums' size (sums of up
// to 800 products of [-1, 1] values here) where F(2x2, 3x3) and the direct convolutions stay near
// 1e-6.
constexpr double kWinograd6x6Tolerance = 4e-4;

// Runs all three directions on random tensors and compares with the naive loops; returns the
// kernel names used.
std::vector<std::string> check_against_naive(const Geometry& g, uint64_t seed,
                                             const char* engine = "auto", double tolerance = 1e-4) {
  INFO("engine " << engine);
  Rng rng(seed);
  Tensor x = random_tensor({g.n, g.c, g.h, g.w}, rng);
  Tensor w = random_tensor({g.o, g.c, g.kh, g.kw}, rng);
  Tensor dy = random_tensor({g.n, g.o, g.ho(), g.wo()}, rng);
  std::vector<double> y(dy.count(), 0.0), dx(x.count(), 0.0), dw(w.count(), 0.0);
  for_each_tap(g, [&](int64_t xi, int64_t wi, int64_t yi) {
    y[yi] += double{x.data()[xi]} * w.data()[wi];
    dx[xi] += double{dy.data()[yi]} * w.data()[wi];
    dw[wi] += double{dy.data()[yi]} * x.data()[xi];
  });
  std::vector<std::string> names;
  auto run = [&](const char* type, const std::vector<Tensor>& inputs,
                 const std::vector<double>& expected) {
    INFO(type);
    auto op = OperatorRegistry::create(type, g.attrs(engine));
    std::vector<Shape> shapes;
    std::vector<const Tensor*> in;
    for (const Tensor& t : inputs) {
      shapes.push_back(t.shape());
      in.push_back(&t);
    }
    Tensor out(op->output_shapes(shapes)[0]);
    OpContext context;
    op->compute(in, {&out}, context);
    check_close(out, expected, tolerance);
    names.push_back(dynamic_cast<ConvOpBase&>(*op).kernel_name());
  };
  run("conv", {x, w}, y);
  run("conv_grad_data", {dy, w, x}, dx);
  run("conv_grad_weight", {dy, x, w}, dw);
  return names;
}

// check_against_naive for each geometry, each of which must run `kernel` in every direction
// (with takes false: none may).
void check_kernel_choice(const std::vector<Geometry>& geometries, uint64_t seed,
                         const std::string& kernel, bool takes) {
  for (const Geometry& g : geometries) {
    INFO(g.n << " images, " << g.c << " -> " << g.o << " channels, " << g.h << "x" << g.w
             << ", kernel " << g.kh << "x" << g.kw << ", stride " << g.stride_h << ", pad "
             << g.pad_h << "x" << g.pad_w);
    for (const std::string& name : check_against_naive(g, seed)) CHECK((name == kernel) == takes);
  }
}

// Whether oneDNN runs AVX-512 kernels here (ONEDNN_MAX_CPU_ISA=AVX2 caps it), as make_kernel asks.
bool onednn_has_avx512() {
  return (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
}

// Whether the shifted-rows kernel runs: AVX2 and FMA, under the ISA cap (vector_isa.hpp).
bool shifted_rows_run() {
  return purine::vector_isa() != purine::VectorIsa::kBaseline && __builtin_cpu_supports("fma");
}

// Whether Winograd's kernel runs: AVX2 and FMA, under the ISA cap (vector_isa.hpp).
bool winograd_runs() { return shifted_rows_run(); }

// Winograd's kernels for a 3x3 stride-1 convolution: F(4x4, 3x3) for the forward and the data
// gradient over planes of 3x3 pixels or more (the weight gradient only with up to 32 channels
// between input and output), F(2x2, 3x3) otherwise.
const char* const kWinograd4x4 = "winograd:F(4x4,3x3)";
const char* const kWinograd2x2 = "winograd:F(2x2,3x3)";

// Whether `name` is the kernel engine auto runs for a 3x3 stride-1 convolution of 16 channels or
// more (the weight gradient over planes of 7x7 or more): Winograd's `winograd` with oneDNN's AVX2
// kernels, else oneDNN's.
bool auto_3x3_kernel(const std::string& name, const char* winograd) {
  if (winograd_runs() && !onednn_has_avx512()) return name == winograd;
  return name.rfind("onednn:", 0) == 0;
}

// conv_grad_weight of `g` with `engine`: matches the naive loops on one thread within
// `tolerance`, gives the same bits and runs the same kernel on 2, 3, 4 and 8; returns its name.
std::string check_weight_kernel(const Geometry& g, uint64_t seed, const char* engine,
                                double tolerance) {
  INFO(g.n << " images, " << g.c << " -> " << g.o << " channels, " << g.h << "x" << g.w
           << ", kernel " << g.kh << "x" << g.kw << ", engine " << engine);
  Rng rng(seed);
  Tensor x = random_tensor({g.n, g.c, g.h, g.w}, rng);
  Tensor w = random_tensor({g.o, g.c, g.kh, g.kw}, rng);
  Tensor dy = random_tensor({g.n, g.o, g.ho(), g.wo()}, rng);
  std::string kernel;
  auto run = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    auto op = OperatorRegistry::create("conv_grad_weight", g.attrs(engine));
    Tensor dw(w.shape());
    std::fill(dw.mutable_data(), dw.mutable_data() + dw.count(), 7.0f);  // overwritten
    OpContext context;
    op->compute({&dy, &x, &w}, {&dw}, context);
    omp_set_num_threads(saved);
    kernel = dynamic_cast<ConvOpBase&>(*op).kernel_name();
    return dw;
  };
  const Tensor dw = run(1);
  const std::string one_thread = kernel;
  check_close(dw, naive_weight_gradient(g, dy, x), tolerance);
  for (int threads : {2, 3, 4, 8}) {
    INFO(threads << " threads");
    CHECK(same_bits(dw, run(threads)));
    CHECK(kernel == one_thread);
  }
  return one_thread;
}

// The same with engine im2col, which must run `kernel`.
void check_im2col_weight_kernel(const Geometry& g, uint64_t seed, const std::string& kernel) {
  CHECK(check_weight_kernel(g, seed, "im2col", 1e-3) == kernel);
}

}  // namespace

TEST_CASE("conv forward computes a cross-correlation", "[conv]") {
  Tensor x = tensor_of({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor diagonal = tensor_of({1, 1, 2, 2}, {1, 0, 0, 1});
  Tensor y = run_forward("conv", {}, {x, diagonal})[0];
  REQUIRE(y.shape() == Shape{1, 1, 2, 2});
  CHECK(y.data()[0] == 6.0f);  // 1 + 5
  CHECK(y.data()[1] == 8.0f);  // 2 + 6
  CHECK(y.data()[2] == 12.0f);
  CHECK(y.data()[3] == 14.0f);

  // 3x3 box, pad 1, stride 2: windows clipped by the padding.
  Tensor box = tensor_of({1, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1});
  Tensor z = run_forward("conv", Attrs().set("pad", 1).set("stride", 2), {x, box})[0];
  REQUIRE(z.shape() == Shape{1, 1, 2, 2});
  CHECK(z.data()[0] == 12.0f);  // 1 + 2 + 4 + 5
  CHECK(z.data()[1] == 16.0f);  // 2 + 3 + 5 + 6
  CHECK(z.data()[2] == 24.0f);  // 4 + 5 + 7 + 8
  CHECK(z.data()[3] == 28.0f);  // 5 + 6 + 8 + 9
}

TEST_CASE("conv output size rounds down", "[conv]") {
  Rng rng(31);
  Tensor x = random_tensor({2, 3, 8, 7}, rng);
  Tensor w = random_tensor({4, 3, 3, 3}, rng);
  Tensor y = run_forward("conv", Attrs().set("stride", 2), {x, w})[0];
  CHECK(y.shape() == Shape{2, 4, 3, 3});  // (8 - 3) / 2 + 1 = 3, (7 - 3) / 2 + 1 = 3
}

TEST_CASE("conv engine auto picks im2col for the backward passes of few channels", "[conv]") {
  auto few = check_against_naive({2, 3, 21, 6, 4, 3, 2, 2, 1, 1, 0}, 32);  // 11x5 output planes
  CHECK(few[0].rfind("onednn:", 0) == 0);
  CHECK(few[1] == "im2col");
  CHECK(few[2] == "im2col");
  auto many = check_against_naive({2, 8, 9, 9, 16, 3, 3, 1, 1, 1, 1}, 33);
  CHECK(many[0].rfind("onednn:", 0) == 0);
  CHECK(many[1].rfind("onednn:", 0) == 0);
  // 3x3 weights: oneDNN's AVX2 kernels lose to our own there (cpu/conv_kernel_choice.cpp).
  if (onednn_has_avx512())
    CHECK(many[2].rfind("onednn:", 0) == 0);
  else
    CHECK(many[2] == (shifted_rows_run() ? "im2col:shifted rows" : "im2col"));
  // 5x5 weights stay with oneDNN on every ISA.
  auto five = check_against_naive({2, 8, 9, 9, 16, 5, 5, 1, 1, 2, 2}, 37);
  for (const auto& name : five) CHECK(name.rfind("onednn:", 0) == 0);
}

TEST_CASE("conv weight gradient by oneDNN cuts the batch by output pixels", "[conv][determinism]") {
  // At least 4,096 output pixels a chunk, a power of two from 2 to 8 chunks (cpu/conv_onednn.cpp's
  // weight_grad_chunks); 5x5 kernels, which go to oneDNN's chunks on every ISA. Each way matches
  // the naive loops (within the float rounding of sums over up to 40,960 pixels: 2e-3 here) and
  // gives the same bits on 1 to 8 threads.
  struct Case {
    Geometry g;
    const char* chunks;
  };
  for (const Case& c : {Case{{16, 8, 8, 8, 8, 5, 5, 1, 1, 2, 2}, " in 2 chunks"},       // 1,024
                        Case{{16, 8, 32, 32, 8, 5, 5, 1, 1, 2, 2}, " in 4 chunks"},     // 16,384
                        Case{{40, 8, 32, 32, 8, 5, 5, 1, 1, 2, 2}, " in 8 chunks"}}) {  // 40,960
    const std::string name = check_weight_kernel(c.g, 40, "auto", 2e-3);
    INFO(name);
    CHECK(name.rfind("onednn:", 0) == 0);
    CHECK(name.size() > std::strlen(c.chunks));
    CHECK(name.substr(name.size() - std::strlen(c.chunks)) == c.chunks);
  }
}

TEST_CASE("conv engine auto takes GEMMs over image groups for small planes", "[conv]") {
  // Which planes are small depends on oneDNN's kernels (cpu/conv_kernel_choice.cpp).
  const bool avx512 = onednn_has_avx512();
  // 3x3 output planes: oneDNN forward and data gradient, not weights.
  auto small = check_against_naive({4, 16, 5, 5, 24, 3, 3, 2, 2, 1, 1}, 35);
  CHECK(small[0].rfind("onednn:", 0) == 0);
  CHECK(small[1].rfind("onednn:", 0) == 0);
  CHECK(small[2] == "im2col:image groups");
  // 4x4 output planes: the weights too with AVX2 kernels; with AVX-512 oneDNN's chunks.
  auto four =
      check_against_naive({4, 16, 4, 4, 24, 3, 3, 1, 1, 1, 1}, 39, "auto", kWinograd6x6Tolerance);
  CHECK(auto_3x3_kernel(four[0], kWinograd4x4));
  CHECK(auto_3x3_kernel(four[1], kWinograd4x4));
  // 5x5 kernels there: oneDNN's, not Winograd's F(2x2, 5x5) (only from 7x7 planes up).
  auto four_5x5 = check_against_naive({4, 16, 4, 4, 24, 5, 5, 1, 1, 2, 2}, 40);
  CHECK(four_5x5[0].rfind("onednn:", 0) == 0);
  CHECK(four_5x5[1].rfind("onednn:", 0) == 0);
  if (avx512)
    CHECK(four[2].rfind("onednn:", 0) == 0);
  else
    CHECK(four[2] == "im2col:image groups");
  // 2x2 output planes: the forward too with AVX2 kernels.
  auto two = check_against_naive({4, 16, 4, 4, 24, 3, 3, 2, 2, 1, 1}, 36);
  CHECK((two[0] == "im2col:image groups") == !avx512);
  CHECK(two[1].rfind("onednn:", 0) == 0);
  CHECK(two[2] == "im2col:image groups");
  // 5x5 to 7x7 output planes (resnet20's last stage, GoogLeNet-28's conv2): oneDNN with either
  // ISA's kernels (a stride-1 3x3 by Winograd's with AVX2 ones), and so is a strided 3x3 over
  // 14x14.
  const auto seven =
      check_against_naive({4, 16, 7, 7, 24, 3, 3, 1, 1, 1, 1}, 37, "auto", kWinograd6x6Tolerance);
  CHECK(auto_3x3_kernel(seven[0], kWinograd4x4));
  CHECK(auto_3x3_kernel(seven[1], kWinograd4x4));
  CHECK(auto_3x3_kernel(seven[2], kWinograd2x2));
  for (const Geometry& g : {Geometry{4, 16, 5, 5, 24, 1, 1, 1, 1, 0, 0},
                            Geometry{4, 16, 14, 14, 24, 3, 3, 2, 2, 1, 1}}) {
    INFO(g.h << "x" << g.w << ", kernel " << g.kh << ", stride " << g.stride_h);
    for (const std::string& name : check_against_naive(g, 37)) CHECK(name.rfind("onednn:", 0) == 0);
  }
  // Its stride-1 weight gradient: Winograd's, else oneDNN's only with AVX-512 kernels.
  auto stride_one =
      check_against_naive({4, 16, 14, 14, 24, 3, 3, 1, 1, 1, 1}, 38, "auto", kWinograd6x6Tolerance);
  if (winograd_runs() && !avx512)
    CHECK(stride_one[2] == kWinograd2x2);
  else
    CHECK((stride_one[2].rfind("onednn:", 0) == 0) == avx512);
}

TEST_CASE("conv without the taps that meet only padding gives the same results", "[conv]") {
  // 5x3 kernels padded by 2 and 1 over 2x4 and 2x3 planes: only the middle 3 rows ever meet the
  // input, and the columns' windows differ (not dense planes, which take GoogLeNet's 5x5 over
  // 2x2). The dropped taps' weight gradients must come out zero (the naive loops' values).
  for (const Geometry& g :
       {Geometry{6, 12, 2, 4, 20, 5, 3, 1, 1, 2, 1}, Geometry{3, 4, 2, 3, 5, 5, 3, 1, 1, 2, 1}}) {
    INFO(g.h << "x" << g.w << ", kernel " << g.kh << "x" << g.kw);
    for (const std::string& name : check_against_naive(g, 47))
      CHECK(name.rfind("cropped 3x3:", 0) == 0);
  }
  // Every tap meets the input somewhere (3x3 padded by 1 over 4x4): nothing to crop.
  for (const std::string& name : check_against_naive({2, 4, 4, 4, 5, 3, 3, 1, 1, 1, 1}, 48))
    CHECK(name.rfind("cropped", 0) == std::string::npos);
}

TEST_CASE("conv where every output pixel sees every input pixel runs as a dense layer", "[conv]") {
  // One output pixel: the centre of 3x3 and 5x5 kernels over a padded 1x1 plane, a 1x1 kernel, a
  // kernel the input's size (w itself), a 2x2 block of a 4x4 kernel over a padded 2x2 plane.
  // Several: 3x3 padded by 1 and 5x5 padded by 2 over 2x2 planes (GoogLeNet's at 28x28, the
  // centre tap joining 4 pairs of pixels, the corners one), 5x5 padded by 2 over 3x3, 3x5 padded
  // by 1 and 2 over 2x3, and 5x5 with stride 2 padded by 2 over 3x3 (2x2 outputs).
  check_kernel_choice(
      {Geometry{5, 12, 1, 1, 40, 3, 3, 1, 1, 1, 1}, Geometry{5, 12, 1, 1, 40, 5, 5, 1, 1, 2, 2},
       Geometry{5, 12, 1, 1, 40, 1, 1, 1, 1, 0, 0}, Geometry{3, 4, 3, 2, 7, 3, 2, 1, 1, 0, 0},
       Geometry{3, 4, 2, 2, 7, 4, 4, 1, 1, 1, 1}, Geometry{6, 9, 2, 2, 11, 3, 3, 1, 1, 1, 1},
       Geometry{6, 9, 2, 2, 11, 5, 5, 1, 1, 2, 2}, Geometry{4, 5, 3, 3, 6, 5, 5, 1, 1, 2, 2},
       Geometry{4, 5, 2, 3, 6, 3, 5, 1, 1, 1, 2}, Geometry{4, 5, 3, 3, 6, 5, 5, 2, 2, 2, 2}},
      45, "gemm:dense planes", true);
  // Not dense: one output pixel whose stride skips input rows (3x3 over 5x5, stride 3), 1x1
  // kernels over 2x2 planes, 3x3 padded by 1 over 3x3.
  check_kernel_choice(
      {Geometry{2, 3, 5, 5, 4, 3, 3, 3, 3, 0, 0}, Geometry{2, 3, 2, 2, 4, 1, 1, 1, 1, 0, 0},
       Geometry{2, 3, 3, 3, 4, 3, 3, 1, 1, 1, 1}},
      46, "gemm:dense planes", false);
}

// Tagged [isa]: the transposes to and from channels-last rows run under the AVX2 and SSE4.1
// caps too (blocks of 8 and 4 channels where AVX-512 takes 16).
TEST_CASE("conv 1x1 over planes of a few pixels runs as one GEMM in channels-last order",
          "[conv][isa]") {
  // 2x2 planes (GoogLeNet's at 28x28) with channel counts that fill whole blocks of 16, 8 and 4
  // and ones that leave a remainder on each side (19 -> 21, 40 -> 5), and planes of 2, 3 and 4
  // pixels in one row or column.
  check_kernel_choice(
      {Geometry{6, 32, 2, 2, 48, 1, 1, 1, 1, 0, 0}, Geometry{5, 19, 2, 2, 21, 1, 1, 1, 1, 0, 0},
       Geometry{3, 40, 2, 2, 5, 1, 1, 1, 1, 0, 0}, Geometry{4, 17, 1, 2, 9, 1, 1, 1, 1, 0, 0},
       Geometry{4, 9, 3, 1, 17, 1, 1, 1, 1, 0, 0}, Geometry{4, 33, 1, 4, 18, 1, 1, 1, 1, 0, 0}},
      49, "gemm:channels last", true);
  // Not channels last: a 1x1 plane (dense planes), 3x3 planes (more than 4 pixels), a stride,
  // padding.
  check_kernel_choice(
      {Geometry{2, 3, 1, 1, 4, 1, 1, 1, 1, 0, 0}, Geometry{2, 3, 3, 3, 4, 1, 1, 1, 1, 0, 0},
       Geometry{2, 3, 3, 3, 4, 1, 1, 2, 2, 0, 0}, Geometry{2, 3, 2, 2, 4, 1, 1, 1, 1, 1, 1}},
      50, "gemm:channels last", false);
}

TEST_CASE("conv weight gradient as GEMMs over image groups matches naive loops",
          "[conv][determinism]") {
  // Each way of building a group's columns (1x1 without padding: x itself, copied in pieces of a
  // fixed size for planes of 1, 4, 9 and 16 pixels; output rows under 8 wide: position by
  // position for all the images; wider rows: image by image), dw in several tiles (over 64
  // output channels, over 64 columns), and 150 images of 5x8 output planes in two groups (at
  // most 4,096 plane pixels a group: 102 and 48 images) added in order.
  for (const Geometry& g :
       {Geometry{64, 80, 2, 2, 72, 1, 1, 1, 1, 0, 0}, Geometry{9, 24, 1, 1, 20, 1, 1, 1, 1, 0, 0},
        Geometry{9, 24, 3, 3, 20, 1, 1, 1, 1, 0, 0}, Geometry{7, 10, 4, 4, 12, 1, 1, 1, 1, 0, 0},
        Geometry{3, 6, 5, 8, 9, 1, 1, 1, 1, 0, 0}, Geometry{64, 16, 1, 1, 72, 3, 3, 1, 1, 1, 1},
        Geometry{5, 12, 7, 5, 70, 3, 2, 2, 1, 1, 0}, Geometry{150, 4, 5, 8, 8, 3, 3, 1, 1, 1, 1}})
    check_im2col_weight_kernel(g, 44, "im2col:image groups");
}

TEST_CASE("conv weight gradient by shifted rows matches naive loops at any thread count",
          "[conv][determinism]") {
  // Stride 1: square and non-square kernels, no, symmetric and uneven padding, output channels
  // and taps that fill no whole tile (4 x 3), rows whose padded length is no multiple of 8, a
  // batch that splits unevenly into chunks, and groups of several images (small planes).
  if (!shifted_rows_run()) {
    WARN(
        "skipped: no AVX2 and FMA (on this CPU or under ONEDNN_MAX_CPU_ISA), which the "
        "shifted-rows kernel needs");
    return;
  }
  for (const Geometry& g :
       {Geometry{13, 5, 11, 10, 7, 3, 3, 1, 1, 1, 1}, Geometry{9, 3, 12, 9, 6, 3, 2, 1, 1, 0, 1},
        Geometry{20, 6, 8, 13, 10, 5, 5, 1, 1, 2, 2}, Geometry{3, 2, 9, 9, 5, 1, 1, 1, 1, 0, 0},
        Geometry{64, 16, 28, 28, 16, 3, 3, 1, 1, 1, 1}})
    check_im2col_weight_kernel(g, 45, "im2col:shifted rows");
}

TEST_CASE("conv weight gradient of an empty batch is zero with every kernel", "[conv]") {
  // 1x1 output planes (dense planes), 2x2 ones (GEMMs over image groups; with a 1x1 kernel,
  // channels last) and 10x10 ones (im2col's per-image chunks; with no images oneDNN is never
  // asked).
  for (const Geometry& g :
       {Geometry{0, 16, 3, 3, 24, 3, 3, 1, 1, 0, 0}, Geometry{0, 16, 4, 4, 24, 3, 3, 1, 1, 0, 0},
        Geometry{0, 16, 2, 2, 24, 1, 1, 1, 1, 0, 0},
        Geometry{0, 16, 12, 12, 24, 3, 3, 1, 1, 0, 0}}) {
    for (const char* engine : {"auto", "onednn", "im2col"}) {
      INFO(g.h << "x" << g.w << ", engine " << engine);
      Tensor x({g.n, g.c, g.h, g.w}), w({g.o, g.c, g.kh, g.kw}), dy({g.n, g.o, g.ho(), g.wo()});
      Tensor dw(w.shape());
      std::fill(dw.mutable_data(), dw.mutable_data() + dw.count(), 7.0f);
      auto op = OperatorRegistry::create("conv_grad_weight", g.attrs(engine));
      OpContext context;
      op->compute({&dy, &x, &w}, {&dw}, context);
      CHECK(std::all_of(dw.data(), dw.data() + dw.count(), [](float v) { return v == 0.0f; }));
    }
  }
}

TEST_CASE("conv matches naive loops with both engines", "[conv]") {
  for (const char* engine : {"onednn", "im2col"}) {
    // Non-square kernels, strides and pads; dropped last rows and columns (stride 2 over 6).
    for (const Geometry& g :
         {Geometry{2, 3, 7, 6, 4, 3, 2, 2, 1, 1, 0}, Geometry{2, 8, 9, 9, 16, 3, 3, 1, 1, 1, 1},
          Geometry{2, 8, 6, 6, 8, 3, 3, 2, 2, 0, 0}, Geometry{3, 2, 6, 7, 3, 3, 3, 2, 3, 1, 2},
          Geometry{1, 4, 5, 5, 2, 1, 1, 1, 1, 0, 0}}) {
      auto names = check_against_naive(g, 34, engine);
      for (const auto& name : names) {
        CHECK(name.substr(0, 6) == std::string(engine).substr(0, 6));
      }
    }
  }
}

TEST_CASE("conv matches naive loops on the 2-conv network's shapes", "[conv]") {
  check_against_naive({1, 1, 28, 28, 32, 5, 5, 1, 1, 2, 2}, 36);
  // Winograd's F(2x2, 5x5) under auto where it runs: errors of 1e-5 of the sums' size.
  check_against_naive({1, 32, 14, 14, 64, 5, 5, 1, 1, 2, 2}, 37, "auto", kWinograd6x6Tolerance);
}

TEST_CASE("conv results do not depend on the thread count", "[conv][determinism]") {
  // All large enough (over 2^20 multiply-adds) to run on several threads: few channels (im2col
  // backward under auto), 16 -> 32 (where oneDNN's AVX-512 weight gradient once split the batch
  // by thread), the 2-conv network's second layer at batch 64, a batch that does not split
  // evenly into chunks (5x5 planes: the weights by GEMMs over image groups under auto with
  // oneDNN's AVX2 kernels, by its chunks with AVX-512, and the forward by image groups under
  // im2col), 1x1 planes and 5x5 kernels over 2x2 planes (dense planes under auto), and 1x1
  // kernels over 2x2 planes (channels last under auto).
  for (Geometry g :
       {Geometry{16, 1, 16, 16, 16, 5, 5, 1, 1, 2, 2}, Geometry{8, 16, 8, 8, 32, 3, 3, 1, 1, 1, 1},
        Geometry{64, 32, 14, 14, 64, 5, 5, 1, 1, 2, 2},
        Geometry{11, 16, 9, 9, 24, 3, 3, 2, 2, 1, 1}, Geometry{64, 64, 1, 1, 96, 3, 3, 1, 1, 1, 1},
        Geometry{64, 48, 2, 2, 64, 5, 5, 1, 1, 2, 2},
        Geometry{64, 200, 2, 2, 72, 1, 1, 1, 1, 0, 0}}) {
    Rng rng(38);
    Tensor x = random_tensor({g.n, g.c, g.h, g.w}, rng);
    Tensor w = random_tensor({g.o, g.c, g.kh, g.kw}, rng);
    Tensor dy = random_tensor({g.n, g.o, g.ho(), g.wo()}, rng);
    for (const char* engine : {"auto", "im2col"}) {
      auto run = [&](int threads, const char* type, const std::vector<Tensor>& inputs) {
        const int saved = omp_get_max_threads();
        omp_set_num_threads(threads);
        Tensor out = run_forward(type, g.attrs(engine), inputs)[0];
        omp_set_num_threads(saved);
        return out;
      };
      const Tensor y = run(1, "conv", {x, w}), dx = run(1, "conv_grad_data", {dy, w, x}),
                   dw = run(1, "conv_grad_weight", {dy, x, w});
      for (int threads : {2, 3, 4, 8}) {
        INFO(g.n << " images, " << g.c << " channels, engine " << engine << ", " << threads
                 << " threads");
        CHECK(same_bits(y, run(threads, "conv", {x, w})));
        CHECK(same_bits(dx, run(threads, "conv_grad_data", {dy, w, x})));
        CHECK(same_bits(dw, run(threads, "conv_grad_weight", {dy, x, w})));
      }
    }
  }
}

TEST_CASE("conv_grad_weight with deterministic=0 runs one oneDNN primitive and stays correct",
          "[conv]") {
  const Geometry g{11, 16, 9, 9, 24, 3, 3, 2, 2, 1, 1};
  Rng rng(42);
  Tensor x = random_tensor({g.n, g.c, g.h, g.w}, rng);
  Tensor w = random_tensor({g.o, g.c, g.kh, g.kw}, rng);
  Tensor dy = random_tensor({g.n, g.o, g.ho(), g.wo()}, rng);
  const std::vector<double> expected = naive_weight_gradient(g, dy, x);
  for (int64_t deterministic : {0, 1}) {
    INFO("deterministic " << deterministic);
    auto op = OperatorRegistry::create("conv_grad_weight",
                                       g.attrs("onednn").set("deterministic", deterministic));
    Tensor dw(w.shape());
    OpContext context;
    op->compute({&dy, &x, &w}, {&dw}, context);
    check_close(dw, expected, 1e-4);
    const std::string name = dynamic_cast<ConvOpBase&>(*op).kernel_name();
    CHECK(name.rfind("onednn:", 0) == 0);
    CHECK((name.find(" chunks") != std::string::npos) == (deterministic == 1));
  }
}

TEST_CASE("conv_grad_weight without the attribute follows deterministic_kernels()", "[conv]") {
  const Geometry g{11, 16, 9, 9, 24, 3, 3, 2, 2, 1, 1};
  Rng rng(43);
  Tensor x = random_tensor({g.n, g.c, g.h, g.w}, rng);
  Tensor w = random_tensor({g.o, g.c, g.kh, g.kw}, rng);
  Tensor dy = random_tensor({g.n, g.o, g.ho(), g.wo()}, rng);
  // The kernel that ran, for an op made while the process-wide default is `on`.
  const auto kernel_under = [&](bool on, const Attrs& attrs) {
    set_deterministic_kernels(on);
    auto op = OperatorRegistry::create("conv_grad_weight", attrs);
    Tensor dw(w.shape());
    OpContext context;
    op->compute({&dy, &x, &w}, {&dw}, context);
    set_deterministic_kernels(true);
    return dynamic_cast<ConvOpBase&>(*op).kernel_name();
  };
  REQUIRE(deterministic_kernels());  // the default
  CHECK(kernel_under(true, g.attrs("onednn")).find(" chunks") != std::string::npos);
  CHECK(kernel_under(false, g.attrs("onednn")).find(" chunks") == std::string::npos);
  // The op's own attribute wins.
  CHECK(kernel_under(false, g.attrs("onednn").set("deterministic", int64_t{1})).find(" chunks") !=
        std::string::npos);
}

TEST_CASE("conv caches its kernel and rebuilds it for a new shape", "[conv]") {
  Rng rng(39);
  auto op = OperatorRegistry::create("conv", Attrs().set("pad", 1));
  Tensor w = random_tensor({4, 2, 3, 3}, rng);
  for (int64_t n : {2, 2, 3}) {
    Tensor x = random_tensor({n, 2, 5, 5}, rng);
    Tensor y({n, 4, 5, 5});
    OpContext context;
    op->compute({&x, &w}, {&y}, context);
    Tensor expected = run_forward("conv", Attrs().set("pad", 1), {x, w})[0];
    for (int64_t i = 0; i < y.count(); ++i) CHECK(y.data()[i] == expected.data()[i]);
  }
}

// Bytes the heap holds for the process (glibc: its arenas' blocks and its mmap'ed ones).
int64_t heap_bytes() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
}

TEST_CASE("conv ops on one thread share its workspace instead of holding activations each",
          "[conv]") {
  const Geometry g{16, 16, 28, 28, 16, 3, 3, 1, 1, 1, 1};
  Rng rng(46);
  const Tensor x = random_tensor({g.n, g.c, g.h, g.w}, rng);
  const Tensor w = random_tensor({g.o, g.c, g.kh, g.kw}, rng);
  const Tensor dy = random_tensor({g.n, g.o, g.ho(), g.wo()}, rng);
  struct Kind {
    const char* type;
    const char* engine;
    std::vector<const Tensor*> inputs;
    Shape output;
  };
  // Every kernel that copies activations: oneDNN's reorders in and out (and its weight
  // gradient's one-thread chunks), im2col's columns, the shifted rows' packed rows.
  const std::vector<Kind> kinds{{"conv", "onednn", {&x, &w}, dy.shape()},
                                {"conv_grad_data", "onednn", {&dy, &w, &x}, x.shape()},
                                {"conv_grad_weight", "onednn", {&dy, &x, &w}, w.shape()},
                                {"conv", "im2col", {&x, &w}, dy.shape()},
                                {"conv_grad_data", "im2col", {&dy, &w, &x}, x.shape()},
                                {"conv_grad_weight", "im2col", {&dy, &x, &w}, w.shape()}};
  std::vector<Tensor> first;  // each kind's result from its first op
  const int64_t before = heap_bytes();
  std::vector<std::unique_ptr<Operator>> ops;  // alive to the end, as a graph's are
  for (int copy = 0; copy < 6; ++copy) {
    // Interleaved: each op finds the workspace as another kernel left it.
    for (size_t k = 0; k < kinds.size(); ++k) {
      INFO(kinds[k].type << " with engine " << kinds[k].engine << ", op " << copy);
      ops.push_back(OperatorRegistry::create(kinds[k].type, g.attrs(kinds[k].engine)));
      Tensor out(kinds[k].output);
      OpContext context;
      ops.back()->compute(kinds[k].inputs, {&out}, context);
      if (copy == 0) {
        first.push_back(std::move(out));
      } else {
        CHECK(same_bits(out, first[k]));
      }
    }
  }
  int64_t results = 0;
  for (const Tensor& t : first) results += static_cast<int64_t>(sizeof(float)) * t.count();
  const int64_t activation = sizeof(float) * x.count();  // 0.8 MB, as are y, dx and dy
  // 36 ops each holding an input and an output would take at least 72 activations (58 MB).
  // (Earlier tests may have grown this thread's workspace already, or leave memory freed here.)
  const int64_t held = heap_bytes() - before - results;
  INFO("the ops hold " << held << " bytes; an activation is " << activation);
  CHECK(held < 12 * activation);
}

TEST_CASE("conv ops with arguments in channel blocks share the thread's copies of them", "[conv]") {
  // Engine im2col with x and y in channel blocks of 8: the kernel runs on plain copies of both
  // (BlockedArgsKernel), which live in the thread's argument workspace, not in each op.
  const Geometry g{16, 16, 28, 28, 16, 3, 3, 1, 1, 1, 1};
  Rng rng(47);
  const Tensor x = random_tensor({g.n, g.c, g.h, g.w}, rng);
  const Tensor w = random_tensor({g.o, g.c, g.kh, g.kw}, rng);
  Tensor blocked_x(x.shape());
  blocked_x.set_channel_block(8);
  blocked_x.copy_from(x);
  const Tensor plain = run_forward("conv", g.attrs("im2col"), {x, w})[0];
  Tensor y({g.n, g.o, g.ho(), g.wo()});
  y.set_channel_block(8);
  const int64_t before = heap_bytes();
  std::vector<std::unique_ptr<Operator>> ops;  // alive to the end, as a graph's are
  for (int copy = 0; copy < 12; ++copy) {
    ops.push_back(OperatorRegistry::create("conv", g.attrs("im2col")));
    OpContext context;
    ops.back()->compute({&blocked_x, &w}, {&y}, context);
    CHECK(dynamic_cast<ConvOpBase&>(*ops.back()).kernel_name() ==
          "im2col (channel blocks reordered)");
    CHECK(y.values() == plain.values());
  }
  const int64_t activation = sizeof(float) * x.count();
  // Copies of their own would hold 24 activations (x and y for each of 12 ops).
  const int64_t held = heap_bytes() - before;
  INFO("the ops hold " << held << " bytes; an activation is " << activation);
  CHECK(held < 6 * activation);
}

TEST_CASE("conv gradient passes the numeric check", "[conv]") {
  Rng rng(40);
  check_gradient("conv", Attrs().set("pad", 1).set("stride", 2),
                 {random_tensor({2, 3, 5, 5}, rng), random_tensor({4, 3, 3, 3}, rng)});
  check_gradient("conv", Attrs().set("stride", 2).set("engine", "im2col"),
                 {random_tensor({2, 2, 5, 5}, rng), random_tensor({3, 2, 3, 3}, rng)});
  GradientCheckOptions options;
  options.max_probes = 60;
  check_gradient("conv", Attrs().set("pad", 1),
                 {random_tensor({1, 8, 4, 4}, rng), random_tensor({8, 8, 3, 3}, rng)}, options);
}

TEST_CASE("conv rejects mismatched shapes and attributes", "[conv]") {
  Rng rng(41);
  Tensor x = random_tensor({1, 4, 5, 5}, rng);
  REQUIRE_THROWS_WITH(
      run_forward("conv", {}, {x, random_tensor({2, 3, 3, 3}, rng)}),
      Catch::Contains("input 1 (weight) has 3 channels, input 0 has 4; expected equal"));
  REQUIRE_THROWS_WITH(run_forward("conv", {}, {x, random_tensor({2, 4, 7, 7}, rng)}),
                      Catch::Contains("kernel 7x7 is larger than the padded input 5x5"));
  REQUIRE_THROWS_WITH(
      run_forward("conv", {}, {random_tensor({4, 5, 5}, rng), random_tensor({2, 4, 3, 3}, rng)}),
      Catch::Contains("expected [N, C, H, W]"));
  REQUIRE_THROWS_WITH(
      run_forward("conv", Attrs().set("stride", 0), {x, random_tensor({2, 4, 3, 3}, rng)}),
      Catch::Contains("stride is 0x0, expected 1 or more"));
  REQUIRE_THROWS_WITH(
      run_forward("conv", Attrs().set("engine", "cudnn"), {x, random_tensor({2, 4, 3, 3}, rng)}),
      Catch::Contains("engine is 'cudnn', expected 'auto', 'onednn', 'im2col' or 'winograd'"));
  REQUIRE_THROWS_WITH(
      run_forward("conv_grad_data", {},
                  {random_tensor({1, 2, 2, 2}, rng), random_tensor({2, 4, 3, 3}, rng), x}),
      Catch::Contains("input 0 (dy) has shape [1,2,2,2], expected [1,2,3,3]"));
}

namespace {

// conv, bias and relu as three ops, and conv_bias_relu, on the same tensors; the kernels' names.
struct FusedAndUnfused {
  Tensor unfused, fused;
  std::string unfused_kernel, fused_kernel;
};

FusedAndUnfused conv_bias_relu_both_ways(const Geometry& g, const char* engine, int threads,
                                         uint64_t seed) {
  Rng rng(seed);
  Tensor x = random_tensor({g.n, g.c, g.h, g.w}, rng);
  Tensor w = random_tensor({g.o, g.c, g.kh, g.kw}, rng);
  Tensor b = random_tensor({g.o}, rng);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  FusedAndUnfused result;
  auto run = [&](const char* type, const std::vector<const Tensor*>& in, std::string* kernel) {
    auto op = OperatorRegistry::create(type, g.attrs(engine));
    std::vector<Shape> shapes;
    for (const Tensor* t : in) shapes.push_back(t->shape());
    Tensor out(op->output_shapes(shapes)[0]);
    OpContext context;
    op->compute(in, {&out}, context);
    if (kernel) *kernel = dynamic_cast<ConvOpBase&>(*op).kernel_name();
    return out;
  };
  Tensor z = run("conv", {&x, &w}, &result.unfused_kernel);
  Tensor biased = run_forward("bias", {}, {z, b})[0];
  result.unfused = run_forward("relu", {}, {biased})[0];
  result.fused = run("conv_bias_relu", {&x, &w, &b}, &result.fused_kernel);
  omp_set_num_threads(saved);
  return result;
}

}  // namespace

// Tagged [determinism], so it runs under ONEDNN_MAX_CPU_ISA=AVX2 and SSE41 (tests/CMakeLists.txt):
// oneDNN's post-ops must round as the three ops do on every ISA's kernels.
TEST_CASE("conv_bias_relu equals conv then bias then relu bit for bit", "[conv][determinism]") {
  // The convnet's two convolutions, GoogLeNet's 1x1, 3x3 and 5x5 shapes (more input channels
  // than one oneDNN block, so the sum is split over channel blocks), a stride, few channels, and
  // 1x1 and 2x2 output planes (dense planes under auto, GEMMs over image groups under im2col),
  // and a 1x1 kernel over 2x2 planes (channels last under auto).
  for (Geometry g :
       {Geometry{8, 1, 28, 28, 32, 5, 5, 1, 1, 2, 2}, Geometry{8, 32, 14, 14, 64, 5, 5, 1, 1, 2, 2},
        Geometry{4, 192, 7, 7, 64, 1, 1, 1, 1, 0, 0}, Geometry{4, 96, 7, 7, 128, 3, 3, 1, 1, 1, 1},
        Geometry{4, 16, 7, 7, 32, 5, 5, 1, 1, 2, 2}, Geometry{5, 3, 9, 9, 7, 3, 3, 2, 2, 1, 1},
        Geometry{16, 64, 1, 1, 96, 3, 3, 1, 1, 1, 1}, Geometry{16, 48, 2, 2, 40, 3, 3, 1, 1, 1, 1},
        Geometry{16, 40, 2, 2, 24, 1, 1, 1, 1, 0, 0}}) {
    for (const char* engine : {"auto", "onednn", "im2col"}) {
      for (int threads : {1, 2}) {
        INFO(g.n << "x" << g.c << "x" << g.h << "x" << g.w << " -> " << g.o << ", kernel " << g.kh
                 << ", engine " << engine << ", " << threads << " threads");
        const FusedAndUnfused r = conv_bias_relu_both_ways(g, engine, threads, 41);
        INFO("kernels: " << r.unfused_kernel << " / " << r.fused_kernel);
        CHECK(same_bits(r.unfused, r.fused));
        // The same oneDNN implementation, with post-ops: no slower kernel behind the fusion.
        CHECK(r.fused_kernel == r.unfused_kernel);
      }
    }
  }
}

TEST_CASE("conv_bias_relu gradient ops are bias_relu_grad and the conv gradients", "[conv]") {
  auto op = OperatorRegistry::create("conv_bias_relu", Attrs().set("pad", 1).set("stride", 2));
  const GradientSpec spec = op->gradient();
  REQUIRE(spec.ops.size() == 3);
  CHECK(spec.aliases.empty());
  CHECK(spec.ops[0].type == "bias_relu_grad");
  CHECK(spec.ops[1].type == "conv_grad_data");
  CHECK(spec.ops[2].type == "conv_grad_weight");
  // The convolution's gradients keep its attributes.
  CHECK(spec.ops[1].attrs.get_int("stride", 1) == 2);
  CHECK(spec.ops[2].attrs.get_int("pad", 0) == 1);
  // bias_relu_grad reads y (the fused op's output), not the pre-activation.
  CHECK(spec.ops[0].inputs[0].kind == GradRef::kOutput);
}

TEST_CASE("conv_bias_relu gradient passes the numeric check", "[conv]") {
  // Inputs of one sign and a positive bias keep the pre-activations away from ReLU's kink,
  // where a finite difference is meaningless.
  Rng rng(42);
  check_gradient(
      "conv_bias_relu", Attrs().set("pad", 1),
      {random_tensor({2, 3, 5, 5}, rng, 0.1f, 1.0f), random_tensor({4, 3, 3, 3}, rng, 0.1f, 1.0f),
       random_tensor({4}, rng, 0.5f, 1.0f)});
}

TEST_CASE("conv_bias_relu rejects a bias of the wrong size", "[conv]") {
  Rng rng(43);
  CHECK_THROWS_WITH(run_forward("conv_bias_relu", {},
                                {random_tensor({1, 2, 4, 4}, rng), random_tensor({3, 2, 3, 3}, rng),
                                 random_tensor({2}, rng)}),
                    Catch::Contains("input 2 (bias) has shape [2], expected [3]"));
}

// Tagged [isa]: it runs under ONEDNN_MAX_CPU_ISA=AVX2 and SSE41 as well (blocks of 8 there).
TEST_CASE("conv in channel blocks gives the plain kernels' bits in every direction",
          "[conv][isa]") {
  const int block = conv_channel_block();
  CHECK(block ==
        ((dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core
             ? 16
             : 8));
  // oneDNN's kernels (3x3 over 8x8, a stride), a stem of 3 input channels (only y and dy in
  // blocks; its weight gradient by shifted rows, through plain copies), 1x1 planes (the dense
  // planes' kernel, through plain copies), and the convnet's stem (oneDNN's GEMM-based kernel
  // under the SSE4.1 cap, whose conv_bias_relu adds the bias to blocks itself).
  for (Geometry g :
       {Geometry{4, 16, 8, 8, 32, 3, 3, 1, 1, 1, 1}, Geometry{3, 32, 9, 9, 16, 3, 3, 2, 2, 1, 1},
        Geometry{4, 3, 8, 8, 16, 3, 3, 1, 1, 1, 1}, Geometry{8, 16, 1, 1, 32, 3, 3, 1, 1, 1, 1},
        Geometry{4, 1, 28, 28, 32, 5, 5, 1, 1, 2, 2}}) {
    INFO(g.n << "x" << g.c << "x" << g.h << "x" << g.w << " -> " << g.o << ", kernel " << g.kh
             << ", stride " << g.stride_h);
    Rng rng(77);
    const Tensor x = random_tensor({g.n, g.c, g.h, g.w}, rng);
    const Tensor w = random_tensor({g.o, g.c, g.kh, g.kw}, rng);
    const Tensor b = random_tensor({g.o}, rng);
    const Tensor dy = random_tensor({g.n, g.o, g.ho(), g.wo()}, rng);
    const Attrs attrs = g.attrs();
    const bool c_blocks = g.c % block == 0;  // x and dx can take blocks
    struct Case {
      const char* type;
      std::vector<Tensor> inputs;
      int blocked;  // the arguments given in blocks
    };
    for (const Case& c :
         {Case{"conv", {x, w}, 1 + c_blocks}, Case{"conv_bias_relu", {x, w, b}, 1 + c_blocks},
          Case{"conv_grad_data", {dy, w, x}, 1 + c_blocks},
          Case{"conv_grad_weight", {dy, x, w}, 1 + c_blocks}}) {
      INFO(c.type);
      int blocked = 0;
      const auto got = run_forward_blocked(c.type, attrs, c.inputs, block, &blocked);
      CHECK(blocked == c.blocked);
      CHECK(same_bits(got[0], run_forward(c.type, attrs, c.inputs)[0]));
    }
  }
  // Blocks of another size than the kernels' are not taken.
  auto conv = OperatorRegistry::create("conv", {});
  CHECK(conv->channel_blocking({Shape{2, 32, 4, 4}, Shape{32, 32, 3, 3}}, block / 2).kind ==
        ChannelBlocking::kNone);
}

// Tagged [isa]: it runs under the AVX2 and SSE41 caps too (no shifted rows under SSE41).
TEST_CASE("the shifted-rows weight gradient reads channel blocks as they are", "[conv][isa]") {
  // A stride-1 3x3 gradient of 16 output channels over 12x12 planes: shifted rows under
  // engine im2col wherever the CPU has AVX2 and FMA; blocks of 8 and 16 (two vectors of 8), each
  // of dy and x blocked or plain. The same bits as plain, and no reorder in the kernel's name.
  const Geometry g{6, 16, 12, 12, 16, 3, 3, 1, 1, 1, 1};
  Rng rng(91);
  const Tensor dy = random_tensor({g.n, g.o, g.ho(), g.wo()}, rng);
  const Tensor x = random_tensor({g.n, g.c, g.h, g.w}, rng);
  const Tensor w = random_tensor({g.o, g.c, g.kh, g.kw}, rng);
  const Tensor plain = run_forward("conv_grad_weight", g.attrs("im2col"), {dy, x, w})[0];
  for (int block : {8, 16}) {
    for (int blocked_inputs : {1, 2, 3}) {  // bit 0: dy, bit 1: x
      INFO("block " << block << ", dy " << (blocked_inputs & 1 ? "blocked" : "plain") << ", x "
                    << (blocked_inputs & 2 ? "blocked" : "plain"));
      std::vector<Tensor> given;
      for (const Tensor* t : {&dy, &x, &w}) given.emplace_back(t->shape());
      if (blocked_inputs & 1) given[0].set_channel_block(block);
      if (blocked_inputs & 2) given[1].set_channel_block(block);
      given[0].copy_from(dy);
      given[1].copy_from(x);
      given[2].copy_from(w);
      Tensor dw(w.shape());
      auto op = OperatorRegistry::create("conv_grad_weight", g.attrs("im2col"));
      OpContext context;
      op->compute({&given[0], &given[1], &given[2]}, {&dw}, context);
      CHECK(same_bits(dw, plain));
      const std::string kernel = dynamic_cast<ConvOpBase&>(*op).kernel_name();
      if (shifted_rows_run())
        CHECK(kernel == "im2col:shifted rows");
      else
        CHECK(kernel == "im2col (channel blocks reordered)");
    }
  }
  // The channel-blocks rewrite sees that neither layout costs this kernel a reorder.
  auto op = OperatorRegistry::create("conv_grad_weight", g.attrs("im2col"));
  const ChannelBlocking blocking =
      op->channel_blocking({dy.shape(), x.shape(), w.shape()}, conv_channel_block());
  CHECK(blocking.reorders ==
        (shifted_rows_run() ? ChannelBlocking::kNever : ChannelBlocking::kInBlocks));
}

// Tagged [isa]: it runs under the AVX2 and SSE41 caps too (auto's choice under SSE41).
TEST_CASE(
    "conv by Winograd's F(2x2, 3x3), F(4x4, 3x3) and F(2x2, 5x5) matches naive loops in "
    "every direction",
    "[conv][isa]") {
  // Output planes that 2x2 and 4x4 tiles do and do not fill (a last tile partly outside), pads
  // 0, 1 and 2 (the data gradient's 2, 1 and 0), channels that fill no group of 8 (plain only),
  // several blocks of tiles per image (28x28 planes), blocks across images (7 images of one 4x4
  // tile each, taken 6 at a time), a single pixel, and more outputs than one register tile.
  // 4x4 tiles but over planes of 1 or 2 pixels a side, where 2x2 tiles take fewer products (one
  // 2x2 tile: 16, one 4x4 tile: 36); for the weight gradient only with up to 32 input and output
  // channels (rounded up to 8) between them.
  struct Case {
    Geometry g;
    const char* kernel;         // the forward's and the data gradient's
    const char* weight_kernel;  // the weight gradient's
  };
  const char* const k5x5 = "winograd:F(2x2,5x5)";
  for (const Case& c : {Case{{3, 5, 7, 9, 6, 3, 3, 1, 1, 1, 1}, kWinograd4x4, kWinograd4x4},
                        Case{{2, 8, 7, 5, 16, 3, 3, 1, 1, 0, 0}, kWinograd4x4, kWinograd4x4},
                        Case{{2, 3, 4, 6, 11, 3, 3, 1, 1, 2, 2}, kWinograd4x4, kWinograd4x4},
                        Case{{2, 16, 28, 28, 24, 3, 3, 1, 1, 1, 1}, kWinograd4x4, kWinograd2x2},
                        Case{{4, 9, 1, 1, 40, 3, 3, 1, 1, 1, 1}, kWinograd2x2, kWinograd2x2},
                        Case{{2, 40, 7, 7, 56, 3, 3, 1, 1, 1, 0}, kWinograd4x4, kWinograd2x2},
                        Case{{7, 16, 4, 4, 24, 3, 3, 1, 1, 1, 1}, kWinograd4x4, kWinograd2x2},
                        Case{{3, 16, 3, 3, 16, 3, 3, 1, 1, 1, 1}, kWinograd4x4, kWinograd4x4},
                        Case{{3, 16, 2, 2, 16, 3, 3, 1, 1, 1, 1}, kWinograd2x2, kWinograd2x2},
                        // F(2x2, 5x5): pads 0 to 4, the convnet's second layer.
                        Case{{3, 5, 7, 9, 6, 5, 5, 1, 1, 2, 2}, k5x5, k5x5},
                        Case{{2, 8, 8, 7, 16, 5, 5, 1, 1, 0, 0}, k5x5, k5x5},
                        Case{{2, 3, 4, 6, 11, 5, 5, 1, 1, 4, 3}, k5x5, k5x5},
                        Case{{2, 32, 14, 14, 64, 5, 5, 1, 1, 2, 2}, k5x5, k5x5}}) {
    const Geometry& g = c.g;
    INFO(g.n << "x" << g.c << "x" << g.h << "x" << g.w << " -> " << g.o << ", kernel " << g.kh
             << ", pad " << g.pad_h << "x" << g.pad_w);
    // F(2x2, 3x3) alone keeps to the direct convolution's margin.
    const bool tiles_2x2 =
        std::string(c.kernel) == kWinograd2x2 && std::string(c.weight_kernel) == kWinograd2x2;
    const std::vector<std::string> names =
        check_against_naive(g, 61, "winograd", tiles_2x2 ? 1e-4 : kWinograd6x6Tolerance);
    if (!winograd_runs()) continue;
    CHECK(names[0] == c.kernel);
    CHECK(names[1] == c.kernel);
    CHECK(names[2] == c.weight_kernel);
  }
}

TEST_CASE("Winograd's weight gradient sums blocks of tiles across and within images",
          "[conv][determinism]") {
  // 200 -> 200 channels keep a block at 10 tiles (256 KB of transformed values); 24 images of
  // 5x5 output planes (9 tiles each) make chunks of 3 images, 27 tiles: the first block spans
  // images and the next splits one. Matches the naive loops; the same bits at 1, 2, 3, 4 and 8
  // threads.
  if (!winograd_runs()) {
    WARN("skipped: no AVX2 and FMA (on this CPU or under ONEDNN_MAX_CPU_ISA)");
    return;
  }
  CHECK(check_weight_kernel({24, 200, 5, 5, 200, 3, 3, 1, 1, 1, 1}, 63, "winograd", 1e-3) ==
        "winograd:F(2x2,3x3)");
}

namespace {

// Winograd's kernels for `g` in every direction: the same bits at 1, 2 and 3 threads with the
// activations plain or in channel blocks of 8 or 16, and conv_bias_relu rounding as conv, then
// bias, then relu; `winograd` the forward's and the data gradient's kernel, `weights_kernel` the
// weight gradient's (by default F(2x2, r x r)).
void check_winograd_bits(const Geometry& g, const std::string& winograd,
                         const std::string& weights_kernel = "") {
  INFO("kernel " << g.kh << "x" << g.kw);
  Rng rng(62);
  const Tensor x = random_tensor({g.n, g.c, g.h, g.w}, rng);
  const Tensor w = random_tensor({g.o, g.c, g.kh, g.kw}, rng);
  const Tensor b = random_tensor({g.o}, rng);
  const Tensor dy = random_tensor({g.n, g.o, g.ho(), g.wo()}, rng);
  const Attrs attrs = g.attrs("winograd");
  auto run = [&](const char* type, const std::vector<Tensor>& inputs, int threads, int block) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    const std::string kind = type;
    const bool weights = kind == "conv_grad_weight";
    std::vector<Tensor> given;
    for (const Tensor& t : inputs) {
      given.emplace_back(t.shape());
      // x or dy; for the weight gradient dy and x
      if (block && given.size() <= (weights ? 2u : 1u)) given.back().set_channel_block(block);
      given.back().copy_from(t);
    }
    const Shape& out_shape = kind == "conv_grad_data" ? x.shape()
                             : weights                ? w.shape()
                                                      : dy.shape();
    Tensor out(out_shape);
    if (block && !weights) out.set_channel_block(block);
    auto op = OperatorRegistry::create(type, attrs);
    std::vector<const Tensor*> in;
    for (const Tensor& t : given) in.push_back(&t);
    OpContext context;
    op->compute(in, {&out}, context);
    omp_set_num_threads(saved);
    const std::string weight_default = g.kh == 3 ? kWinograd2x2 : "winograd:F(2x2,5x5)";
    CHECK(dynamic_cast<ConvOpBase&>(*op).kernel_name() == (!weights ? winograd
                                                           : weights_kernel.empty()
                                                               ? weight_default
                                                               : weights_kernel));
    Tensor plain(out_shape);
    plain.set_values(out.values());
    return plain;
  };
  struct Case {
    const char* type;
    std::vector<Tensor> inputs;
  };
  for (const Case& c : {Case{"conv", {x, w}}, Case{"conv_bias_relu", {x, w, b}},
                        Case{"conv_grad_data", {dy, w, x}}, Case{"conv_grad_weight", {dy, x, w}}}) {
    INFO(c.type);
    const Tensor reference = run(c.type, c.inputs, 1, 0);
    for (int threads : {1, 2, 3})
      for (int block : {0, 8, 16}) {
        INFO(threads << " threads, block " << block);
        CHECK(same_bits(reference, run(c.type, c.inputs, threads, block)));
      }
  }
  // conv_bias_relu rounds as conv, then bias, then relu.
  const Tensor y = run("conv", {x, w}, 1, 0), fused = run("conv_bias_relu", {x, w, b}, 1, 0);
  std::vector<float> expected = y.values();
  for (int64_t i = 0; i < y.count(); ++i)
    expected[i] = std::max(expected[i] + b.data()[i / (g.ho() * g.wo()) % g.o], 0.0f);
  CHECK(fused.values() == expected);
}

}  // namespace

// Tagged [isa]: blocks of 8 and 16 on every CPU with AVX2 (16 as an AVX-512 machine's graph
// would give them).
TEST_CASE("Winograd's convolutions give the same bits at any thread count and layout",
          "[conv][isa][determinism]") {
  if (!winograd_runs()) {
    WARN("skipped: no AVX2 and FMA (on this CPU or under ONEDNN_MAX_CPU_ISA)");
    return;
  }
  check_winograd_bits({5, 16, 10, 11, 32, 3, 3, 1, 1, 1, 1}, kWinograd4x4);
  // 16 channels each way: the weight gradient with 4x4 tiles as well.
  check_winograd_bits({5, 16, 10, 11, 16, 3, 3, 1, 1, 1, 1}, kWinograd4x4, kWinograd4x4);
  check_winograd_bits({5, 16, 10, 11, 32, 5, 5, 1, 1, 2, 2}, "winograd:F(2x2,5x5)");
  // 4x4 planes, one tile each: 6 images at a time, then 1.
  check_winograd_bits({7, 16, 4, 4, 32, 3, 3, 1, 1, 1, 1}, kWinograd4x4);
  check_winograd_bits({3, 16, 2, 2, 32, 3, 3, 1, 1, 1, 1}, kWinograd2x2);
}
