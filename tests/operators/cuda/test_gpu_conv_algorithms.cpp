// The cuDNN algorithm a GPU convolution chooses under exact math agrees with the CPU to float
// rounding (norm-wise relative error under 1e-5) in every direction, and under the default fp32
// math (non-fused Winograd allowed) within 5e-3, as TF32, over geometries where cuDNN's FFT
// and Winograd algorithms compete. Every algorithm cuDNN offers, forced through the
// `gpu_algorithm` attribute, is also run and its error printed: the table that says which ones
// exact math must leave out. Skipped without a GPU.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "gpu_test.hpp"
#include "operators/registry.hpp"
#include "random_tensors.hpp"

namespace purine::testing {
namespace {

struct ConvCase {
  Shape x, w;
  int64_t stride, pad;
};

// The output of `type` on `inputs`, on the CPU or on GPU 0.
std::vector<float> run(const std::string& type, const Attrs& attrs,
                       const std::vector<Tensor>& inputs, bool gpu) {
  return op_output(type, attrs, inputs, gpu).values();
}

// ||gpu - cpu|| / ||cpu||: a weight gradient sums N Ho Wo products (12,544 here), whose float
// rounding alone, in the CPU's order or the GPU's, moves a small element by more than 1e-4 of
// max(1, |element|); relative to the whole output, float32 rounding stays far under 1e-5.
double relative_error(const std::vector<float>& cpu, const std::vector<float>& gpu) {
  REQUIRE(cpu.size() == gpu.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    diff += (double(gpu[i]) - cpu[i]) * (double(gpu[i]) - cpu[i]);
    norm += double(cpu[i]) * cpu[i];
  }
  return std::isnan(diff) ? INFINITY : std::sqrt(diff / norm);
}

}  // namespace

TEST_CASE("GPU convolutions under exact math choose FP32-accurate cuDNN algorithms",
          "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  const ScopedGpuMath exact(GpuMath::kExact);
  std::mt19937 gen(17);
  const std::vector<ConvCase> cases{{{4, 3, 12, 12}, {8, 3, 5, 5}, 1, 2},
                                    {{16, 16, 28, 28}, {32, 16, 5, 5}, 1, 2},
                                    {{8, 16, 14, 14}, {32, 16, 3, 3}, 1, 1},
                                    {{8, 32, 14, 14}, {16, 32, 1, 1}, 1, 0},
                                    {{2, 3, 32, 32}, {8, 3, 7, 7}, 2, 3}};
  for (const ConvCase& c : cases) {
    // The CPU side by oneDNN's direct kernels (engine is a CPU attribute): on CPUs without
    // AVX-512, auto takes Winograd's kernels for some of these, which round about 1e-5 of the
    // sums' size.
    const Attrs attrs =
        Attrs().set("stride", c.stride).set("pad", c.pad).set("engine", std::string("onednn"));
    const Tensor x = random_tensor(c.x, gen), w = random_tensor(c.w, gen);
    const Shape y = OperatorRegistry::create("conv", attrs)->infer_shapes({c.x, c.w})[0];
    const Tensor dy = random_tensor(y, gen);
    struct Direction {
      const char* type;
      std::vector<Tensor> inputs;
    };
    const std::vector<Direction> directions{
        {"conv", {x, w}}, {"conv_grad_data", {dy, w, x}}, {"conv_grad_weight", {dy, x, w}}};
    for (const Direction& d : directions) {
      INFO(d.type << " x " << c.x << " w " << c.w << " stride " << c.stride << " pad " << c.pad);
      const std::vector<float> expected = run(d.type, attrs, d.inputs, false);
      CHECK(relative_error(expected, run(d.type, attrs, d.inputs, true)) <= 1e-5);
      double fp32_error = 0;
      {
        const ScopedGpuMath fp32(GpuMath::kFp32);
        fp32_error = relative_error(expected, run(d.type, attrs, d.inputs, true));
      }
      CHECK(fp32_error <= 5e-3);
      std::ostringstream table;
      for (int64_t algo = 0; algo < 8; ++algo) {
        try {
          const Attrs forced = Attrs(attrs).set("gpu_algorithm", algo);
          table << " algo " << algo << ": "
                << relative_error(expected, run(d.type, forced, d.inputs, true)) << ";";
        } catch (const Error&) {
          table << " algo " << algo << ": not offered;";
        }
      }
      WARN(d.type << " x " << c.x << " w " << c.w << ", error under fp32 math " << fp32_error
                  << ", error of each cuDNN algorithm:" << table.str());
    }
  }
}

}  // namespace purine::testing
