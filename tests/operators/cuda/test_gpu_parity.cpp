// CPU-GPU parity of the GPU kernels (operators/cuda/): each operator runs on random inputs on
// the CPU and on GPU 0, and the outputs agree within a relative 1e-4 (float32; the element-wise
// kernels, copies and fills agree bit for bit). Skipped, saying so, without a GPU.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/rng.hpp"
#include "gpu_test.hpp"
#include "operators/gpu_kernel.hpp"
#include "operators/registry.hpp"

namespace purine::testing {
namespace {

Tensor random_tensor(const Shape& shape, std::mt19937& gen, float lo = -2.0f, float hi = 2.0f) {
  Tensor t(shape);
  std::uniform_real_distribution<float> uniform(lo, hi);
  float* p = t.mutable_data();
  for (int64_t i = 0; i < t.count(); ++i) p[i] = uniform(gen);
  return t;
}

// The largest |gpu - cpu| / max(1, |cpu|) over every output.
double parity_error(const std::string& type, const Attrs& attrs, std::vector<Tensor> inputs,
                    uint64_t seed = 7) {
  std::unique_ptr<Operator> op = OperatorRegistry::create(type, attrs);
  std::vector<Shape> shapes;
  for (const Tensor& t : inputs) shapes.push_back(t.shape());
  const std::vector<Shape> out_shapes = op->infer_shapes(shapes);

  std::vector<const Tensor*> cpu_in;
  for (const Tensor& t : inputs) cpu_in.push_back(&t);
  std::vector<Tensor> cpu_out;
  for (const Shape& s : out_shapes) cpu_out.emplace_back(s);
  std::vector<Tensor*> cpu_out_ptrs;
  for (Tensor& t : cpu_out) cpu_out_ptrs.push_back(&t);
  Rng cpu_rng(seed);
  OpContext context(&cpu_rng);
  op->compute(cpu_in, cpu_out_ptrs, context);

  std::vector<Tensor> gpu_in;
  for (const Tensor& t : inputs) gpu_in.push_back(on_gpu(t));
  std::vector<const Tensor*> gpu_in_ptrs;
  for (const Tensor& t : gpu_in) gpu_in_ptrs.push_back(&t);
  std::vector<Tensor> gpu_out;
  for (const Shape& s : out_shapes) gpu_out.emplace_back(s, Location::gpu(0));
  std::vector<Tensor*> gpu_out_ptrs;
  for (Tensor& t : gpu_out) gpu_out_ptrs.push_back(&t);
  Rng gpu_rng(seed);
  run_on_gpu(*op, gpu_in_ptrs, gpu_out_ptrs, &gpu_rng);

  double worst = 0;
  for (size_t o = 0; o < cpu_out.size(); ++o) {
    const std::vector<float> expected = cpu_out[o].values(), actual = gpu_out[o].values();
    REQUIRE(expected.size() == actual.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      const double e = std::abs(double(actual[i]) - expected[i]) /
                       std::max(1.0, std::abs(double(expected[i])));
      worst = std::isnan(e) ? INFINITY : std::max(worst, e);
    }
  }
  return worst;
}

}  // namespace

TEST_CASE("element-wise GPU kernels match the CPU", "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  std::mt19937 gen(1);
  const Shape shape{3, 5, 7, 11};
  for (const char* type : {"relu", "sigmoid", "tanh"}) {
    INFO(type);
    CHECK(parity_error(type, {}, {random_tensor(shape, gen)}) <= 1e-4);
  }
  for (const char* type : {"relu_grad", "sigmoid_grad", "tanh_grad", "mul"}) {
    INFO(type);
    CHECK(parity_error(type, {}, {random_tensor(shape, gen), random_tensor(shape, gen)}) <= 1e-4);
  }
  // Sums add in input order on both: bit for bit.
  CHECK(parity_error("sum", {}, {random_tensor(shape, gen), random_tensor(shape, gen)}) == 0);
  CHECK(parity_error("sum", {},
                     {random_tensor(shape, gen), random_tensor(shape, gen),
                      random_tensor(shape, gen)}) == 0);
  CHECK(parity_error("scale", Attrs().set("alpha", 0.37), {random_tensor(shape, gen)}) == 0);
}

TEST_CASE("the GPU SGD update matches the CPU", "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  std::mt19937 gen(2);
  const Shape shape{1000, 33};
  Tensor lr(Shape{});
  lr.fill(0.05f);
  CHECK(parity_error("sgd_update", Attrs().set("momentum", 0.9).set("weight_decay", 5e-4),
                     {random_tensor(shape, gen), random_tensor(shape, gen),
                      random_tensor(shape, gen), lr}) <= 1e-6);
}

TEST_CASE("GPU fills give the CPU's values for the same generator", "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  const std::vector<int64_t> shape{64, 3, 5, 5};
  CHECK(parity_error("fill_constant", Attrs().set("shape", shape).set("value", 0.25), {}) == 0);
  CHECK(parity_error("fill_uniform", Attrs().set("shape", shape), {}) == 0);
  CHECK(parity_error("fill_gaussian", Attrs().set("shape", shape).set("std", 0.1), {}) == 0);
  CHECK(parity_error("fill_xavier", Attrs().set("shape", shape), {}) == 0);
  CHECK(parity_error("fill_kaiming", Attrs().set("shape", shape), {}) == 0);
}

TEST_CASE("copies between the host and GPUs keep every value", "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  std::mt19937 gen(3);
  const Tensor host = random_tensor({17, 9}, gen);
  std::unique_ptr<Operator> copy = OperatorRegistry::create("copy");
  Tensor device({17, 9}, Location::gpu(0)), back({17, 9});
  run_on_gpu(*copy, {&host}, {&device});
  run_on_gpu(*copy, {&device}, {&back});
  CHECK(back.values() == host.values());
  if (device_runtime()->device_count() > 1) {
    Tensor other({17, 9}, Location::gpu(1));
    run_on_gpu(*copy, {&device}, {&other});
    CHECK(other.values() == host.values());
  }
}

TEST_CASE("the CUDA backend registers a GPU kernel for the operators it covers",
          "[cuda][registry]") {
  // Runs without a GPU too: the kernels are registered whenever the backend is built.
  if (!device_runtime()) {
    WARN("skipped: this build has no CUDA backend");
    return;
  }
  for (const char* type : {"relu", "sigmoid", "tanh", "relu_grad", "sigmoid_grad", "tanh_grad",
                           "sum", "mul", "scale", "sgd_update", "copy", "fill_constant",
                           "fill_uniform", "fill_gaussian", "fill_xavier", "fill_kaiming"}) {
    INFO(type);
    CHECK(GpuKernels::find(type) != nullptr);
  }
}

}  // namespace purine::testing
