// GpuMath (operators/gpu_kernel.hpp): under kTf32 the GPU's convolutions and inner products may
// round operands to TF32 (about 1e-3 from float32); under kFp32 (cuBLAS's default math) and
// kExact (its pedantic math) inner products agree with the CPU to float rounding and convolutions
// within what non-fused Winograd rounds; under kExact convolutions too agree to float rounding.
// Skipped without a GPU.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu_test.hpp"
#include "operators/gpu_kernel.hpp"
#include "operators/registry.hpp"

namespace purine::testing {
namespace {

// ||gpu - cpu|| / ||cpu|| of `type`'s one output on inputs of `shapes`, uniform in [-1, 1].
double relative_error(const std::string& type, const Attrs& attrs,
                      const std::vector<Shape>& shapes) {
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<Tensor> host, device;
  for (const Shape& s : shapes) {
    Tensor t(s);
    for (int64_t i = 0; i < t.count(); ++i) t.mutable_data()[i] = uniform(gen);
    device.push_back(on_gpu(t));
    host.push_back(std::move(t));
  }
  std::unique_ptr<Operator> op = OperatorRegistry::create(type, attrs);
  const Shape out_shape = op->infer_shapes(shapes)[0];
  std::vector<const Tensor*> in_host, in_device;
  for (const Tensor& t : host) in_host.push_back(&t);
  for (const Tensor& t : device) in_device.push_back(&t);
  Tensor expected(out_shape), actual(out_shape, Location::gpu(0));
  std::vector<Tensor*> out_host{&expected}, out_device{&actual};
  OpContext context;
  op->compute(in_host, out_host, context);
  run_on_gpu(*op, in_device, out_device);
  const std::vector<float> got = actual.values();
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < expected.count(); ++i) {
    diff += std::pow(double(got[i]) - expected.data()[i], 2);
    norm += std::pow(double(expected.data()[i]), 2);
  }
  return std::sqrt(diff / norm);
}

}  // namespace

TEST_CASE("TF32 math is used only when asked, and stays near float32", "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  // The CPU side by oneDNN's direct kernels: on CPUs without AVX-512, auto takes Winograd's
  // F(4x4, 3x3) here, which rounds about 1e-5 of the sums' size.
  const Attrs conv =
      Attrs().set("pad", int64_t{1}).set("stride", int64_t{1}).set("engine", std::string("onednn"));
  const std::vector<Shape> conv_shapes{{16, 64, 28, 28}, {64, 64, 3, 3}};
  const std::vector<Shape> product_shapes{{256, 1024}, {512, 1024}};
  REQUIRE(gpu_math() == GpuMath::kFp32);  // the default
  const double conv_fp32 = relative_error("conv", conv, conv_shapes);
  const double product_fp32 = relative_error("inner_product", {}, product_shapes);
  CHECK(conv_fp32 < 5e-3);  // non-fused Winograd may compute it
  CHECK(product_fp32 < 1e-5);
  set_gpu_math(GpuMath::kExact);
  CHECK(relative_error("conv", conv, conv_shapes) < 1e-5);
  CHECK(relative_error("inner_product", {}, product_shapes) < 1e-5);  // pedantic cuBLAS
  set_gpu_math(GpuMath::kTf32);
  const double conv_tf32 = relative_error("conv", conv, conv_shapes);
  const double product_tf32 = relative_error("inner_product", {}, product_shapes);
  set_gpu_math(GpuMath::kFp32);
  CHECK(conv_tf32 < 5e-3);
  CHECK(product_tf32 < 5e-3);
  // TF32 keeps 10 mantissa bits: on sums of 576 or 1024 products its error shows.
  CHECK(product_tf32 > 10 * product_fp32);
  WARN("relative error, fp32 / tf32: conv " << conv_fp32 << " / " << conv_tf32 << ", inner product "
                                            << product_fp32 << " / " << product_tf32);
}

}  // namespace purine::testing
