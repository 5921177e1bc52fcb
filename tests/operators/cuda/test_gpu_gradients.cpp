// Every differentiable operator's gradient on GPU 0, by the public numeric checker
// (operators/gradient_check.hpp) run at a GPU location: the forward kernels, the gradient
// kernels and their shapes are checked on the device itself, not only against the CPU's
// outputs. Skipped, saying so, without a GPU.
#include <catch2/catch.hpp>

#include "gpu_test.hpp"
#include "operators/gradient_check.hpp"
#include "tests/operators/gradient_test.hpp"

namespace purine::testing {
namespace {

GradientCheckOptions on_gpu0(GradientCheckOptions options = {}) {
  options.location = Location::gpu(0);
  return options;
}

// Values spaced 0.01 apart in random order: max pooling's argmax does not move under the probe.
Tensor distinct(const Shape& shape, Rng& rng) {
  std::vector<float> values(shape.count());
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.01f * static_cast<float>(i) - 1.0f;
  for (size_t i = values.size(); i > 1; --i) std::swap(values[i - 1], values[rng.below(i)]);
  return tensor_of(shape, values);
}

}  // namespace

TEST_CASE("GPU gradients of the element-wise operators pass the numeric check", "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  Rng rng(101);
  Tensor away = random_tensor({3, 4, 5}, rng, 0.1f, 1.0f);
  for (int64_t i = 0; i < away.count(); i += 2) away.mutable_data()[i] *= -1;
  check_gradient("relu", {}, {away}, on_gpu0());
  check_gradient("sigmoid", {}, {random_tensor({3, 4, 5}, rng, -3, 3)}, on_gpu0());
  check_gradient("tanh", {}, {random_tensor({3, 4, 5}, rng, -2, 2)}, on_gpu0());
  check_gradient(
      "sum", {},
      {random_tensor({2, 3}, rng), random_tensor({2, 3}, rng), random_tensor({2, 3}, rng)},
      on_gpu0());
  check_gradient("sum_relu", {}, {away, random_tensor({3, 4, 5}, rng, -0.05f, 0.05f)}, on_gpu0());
  check_gradient("mul", {}, {random_tensor({3, 4}, rng), random_tensor({3, 4}, rng)}, on_gpu0());
  check_gradient("scale", Attrs().set("alpha", 0.75), {random_tensor({5}, rng)}, on_gpu0());
  GradientCheckOptions first_output = on_gpu0();
  first_output.loss_outputs = {0};
  check_gradient("dropout", Attrs().set("ratio", 0.3), {random_tensor({4, 6}, rng)}, first_output);
}

TEST_CASE("GPU gradients of cuBLAS and cuDNN operators pass the numeric check", "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  const ScopedGpuMath exact(GpuMath::kExact);  // the check's finite differences need float rounding
  Rng rng(102);
  check_gradient("inner_product", {}, {random_tensor({3, 2, 2}, rng), random_tensor({5, 4}, rng)},
                 on_gpu0());
  check_gradient("bias", {}, {random_tensor({2, 3, 2, 2}, rng), random_tensor({3}, rng)},
                 on_gpu0());
  check_gradient("conv", Attrs().set("pad", 1).set("stride", 2),
                 {random_tensor({2, 3, 5, 5}, rng), random_tensor({4, 3, 3, 3}, rng)}, on_gpu0());
  GradientCheckOptions sampled = on_gpu0();
  sampled.max_probes = 60;
  check_gradient("conv", Attrs().set("pad", 1),
                 {random_tensor({1, 8, 4, 4}, rng), random_tensor({8, 8, 3, 3}, rng)}, sampled);
  for (const char* mode : {"max", "avg"}) {
    INFO(mode);
    const Attrs attrs = Attrs()
                            .set("mode", mode)
                            .set("kernel", int64_t{3})
                            .set("stride", int64_t{2})
                            .set("pad", int64_t{1});
    check_gradient("pool", attrs, {distinct({1, 2, 6, 5}, rng)}, on_gpu0());
  }
  check_gradient("lrn", Attrs().set("alpha", 0.5), {random_tensor({2, 7, 2, 3}, rng, -2, 2)},
                 on_gpu0());
}

TEST_CASE("GPU gradients of softmax, the loss, batch norm and layout operators pass",
          "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  Rng rng(103);
  check_gradient("softmax", {}, {random_tensor({2, 3, 2, 3}, rng, -2, 2)}, on_gpu0());
  GradientCheckOptions loss_only = on_gpu0();
  loss_only.loss_outputs = {0};
  check_gradient("softmax_cross_entropy", {},
                 {random_tensor({4, 5}, rng, -2, 2), tensor_of({4}, {0.0f, 4.0f, 2.0f, 2.0f})},
                 loss_only);
  GradientCheckOptions bn = loss_only;
  bn.checked_inputs = {0, 1, 2};
  for (const char* mode : {"train", "test"}) {
    INFO(mode);
    check_gradient(
        "batch_norm", Attrs().set("mode", mode),
        {random_tensor({3, 3, 2, 2}, rng), random_tensor({3}, rng), random_tensor({3}, rng),
         random_tensor({3}, rng), random_tensor({3}, rng, 0.5f, 1.5f)},
        bn);
  }
  check_gradient("concat", {}, {random_tensor({2, 2, 3}, rng), random_tensor({2, 3, 3}, rng)},
                 on_gpu0());
  check_gradient("split", Attrs().set("axis", -1).set("sizes", std::vector<int64_t>{1, 3}),
                 {random_tensor({3, 2, 4}, rng)}, on_gpu0());
  check_gradient("reshape", Attrs().set("shape", std::vector<int64_t>{4, 6}),
                 {random_tensor({2, 3, 4}, rng)}, on_gpu0());
}

}  // namespace purine::testing
