// CPU-GPU parity of the GPU kernels (operators/cuda/): each operator runs on random inputs on
// the CPU and on GPU 0, and the outputs agree within a relative 1e-4 (float32; the element-wise
// kernels, copies and fills agree bit for bit; long float sums on the CPU within 1e-3). The
// reductions also run twice on the GPU and must give the same bits. Skipped, saying so, without
// a GPU.
#include <algorithm>
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
#include "random_tensors.hpp"

namespace purine::testing {
namespace {

// The values of every output of `type` run on `inputs` (host tensors): on the CPU, or on GPU 0
// through a fresh stream (so a kernel sees a fresh workspace).
std::vector<std::vector<float>> run_op(const std::string& type, const Attrs& attrs,
                                       const std::vector<Tensor>& inputs, bool gpu,
                                       uint64_t seed = 7) {
  std::unique_ptr<Operator> op = OperatorRegistry::create(type, attrs);
  std::vector<Shape> shapes;
  for (const Tensor& t : inputs) shapes.push_back(t.shape());
  const Location where = gpu ? Location::gpu(0) : Location::cpu();
  std::vector<Tensor> in, out;
  for (const Tensor& t : inputs) in.push_back(gpu ? on_gpu(t) : t);
  for (const Shape& s : op->infer_shapes(shapes)) out.emplace_back(s, where);
  std::vector<const Tensor*> in_ptrs;
  for (const Tensor& t : in) in_ptrs.push_back(&t);
  std::vector<Tensor*> out_ptrs;
  for (Tensor& t : out) out_ptrs.push_back(&t);
  Rng rng(seed);
  if (gpu) {
    run_on_gpu(*op, in_ptrs, out_ptrs, &rng);
  } else {
    OpContext context(&rng);
    op->compute(in_ptrs, out_ptrs, context);
  }
  std::vector<std::vector<float>> values;
  for (const Tensor& t : out) values.push_back(t.values());
  return values;
}

// The largest |gpu - cpu| / max(1, |cpu|) over every output.
double parity_error(const std::string& type, const Attrs& attrs, std::vector<Tensor> inputs,
                    uint64_t seed = 7) {
  const std::vector<std::vector<float>> cpu = run_op(type, attrs, inputs, false, seed);
  const std::vector<std::vector<float>> gpu = run_op(type, attrs, inputs, true, seed);
  REQUIRE(cpu.size() == gpu.size());
  double worst = 0;
  for (size_t o = 0; o < cpu.size(); ++o) {
    const std::vector<float>& expected = cpu[o];
    const std::vector<float>& actual = gpu[o];
    REQUIRE(expected.size() == actual.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      const double e =
          std::abs(double(actual[i]) - expected[i]) / std::max(1.0, std::abs(double(expected[i])));
      worst = std::isnan(e) ? INFINITY : std::max(worst, e);
    }
  }
  return worst;
}

// Whether two GPU runs of `type` on the same inputs give the same bits.
bool gpu_repeats_bits(const std::string& type, const Attrs& attrs,
                      const std::vector<Tensor>& inputs) {
  return run_op(type, attrs, inputs, true) == run_op(type, attrs, inputs, true);
}

// A host tensor of `shape` holding `values`.
Tensor tensor_of(const std::vector<float>& values, const Shape& shape) {
  Tensor t(shape);
  REQUIRE(int64_t(values.size()) == t.count());
  std::copy(values.begin(), values.end(), t.mutable_data());
  return t;
}

// Labels [rows] of random classes in [0, classes).
Tensor random_labels(int64_t rows, int64_t classes, std::mt19937& gen) {
  Tensor labels({rows});
  std::uniform_int_distribution<int64_t> pick(0, classes - 1);
  for (int64_t n = 0; n < rows; ++n) labels.mutable_data()[n] = float(pick(gen));
  return labels;
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
  // The fused sums: sum_relu of 1-6 inputs, relu_grad of 2-7 dy parts (past 4 terms the
  // kernel's longer list of pointers).
  std::vector<Tensor> terms;
  for (int k = 0; k < 7; ++k) terms.push_back(random_tensor(shape, gen));
  CHECK(parity_error("sum", {}, std::vector<Tensor>(terms.begin(), terms.begin() + 6)) == 0);
  for (size_t n = 1; n <= 6; ++n) {
    INFO(n << " terms");
    const std::vector<Tensor> in(terms.begin(), terms.begin() + static_cast<long>(n));
    CHECK(parity_error("sum_relu", {}, in) == 0);
    std::vector<Tensor> grad_in{random_tensor(shape, gen)};
    grad_in.insert(grad_in.end(), terms.begin(), terms.begin() + static_cast<long>(n) + 1);
    CHECK(parity_error("relu_grad", {}, grad_in) == 0);
  }
}

// The output of `type` run at GPU 0 over its own input `shared` (as purine/internal/views.cpp
// places a sum over a buffer it received), as a host tensor.
std::vector<float> gpu_output_over_input(const std::string& type, const std::vector<Tensor>& inputs,
                                         size_t shared) {
  std::unique_ptr<Operator> op = OperatorRegistry::create(type);
  std::vector<Tensor> in;
  for (const Tensor& t : inputs) in.push_back(on_gpu(t));
  std::vector<const Tensor*> in_ptrs;
  for (const Tensor& t : in) in_ptrs.push_back(&t);
  run_on_gpu(*op, in_ptrs, {&in[shared]});
  return in[shared].values();
}

TEST_CASE("GPU sums may write over any of their inputs", "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  std::mt19937 gen(3);
  const Shape shape{4, 9, 13};
  std::vector<Tensor> terms;
  for (int k = 0; k < 6; ++k) terms.push_back(random_tensor(shape, gen));
  for (const char* type : {"sum", "sum_relu"}) {
    for (size_t n : {2, 3, 6}) {
      const std::vector<Tensor> in(terms.begin(), terms.begin() + static_cast<long>(n));
      const std::vector<float> expected = run_op(type, {}, in, false)[0];
      for (size_t shared = 0; shared < n; ++shared) {
        INFO(type << " of " << n << " inputs over input " << shared);
        CHECK(gpu_output_over_input(type, in, shared) == expected);
      }
    }
  }
  // The kernel's list holds 256 terms; more are refused, naming the op, not summed in part.
  const std::vector<Tensor> many(257, random_tensor(Shape{3}, gen));
  CHECK(parity_error("sum", {}, std::vector<Tensor>(many.begin(), many.end() - 1)) == 0);
  CHECK_THROWS_WITH(run_op("sum", {}, many, true),
                    Catch::Contains("sum: 257 terms to add at a GPU; its kernel adds 1 to 256"));
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
  // 30 weights in one op: two launches (24 and 6), blocks crossing from weight to weight, an
  // empty weight skipped; each weight as its own op would give it, bit for bit.
  const Attrs attrs = Attrs().set("momentum", 0.9).set("weight_decay", 5e-4);
  std::vector<Tensor> inputs;
  for (int k = 0; k < 30; ++k) {
    const Shape weight = k == 7 ? Shape{0} : Shape{1 + 97 * k % 1000, 3};
    for (int role = 0; role < 3; ++role) inputs.push_back(random_tensor(weight, gen));
  }
  inputs.push_back(lr);
  const std::vector<std::vector<float>> together = run_op("sgd_update", attrs, inputs, true);
  REQUIRE(together.size() == 60);
  for (int k = 0; k < 30; ++k) {
    INFO("weight " << k);
    const std::vector<std::vector<float>> alone = run_op(
        "sgd_update", attrs, {inputs[3 * k], inputs[3 * k + 1], inputs[3 * k + 2], lr}, true);
    CHECK(together[2 * k] == alone[0]);
    CHECK(together[2 * k + 1] == alone[1]);
  }
  CHECK(parity_error("sgd_update", attrs, inputs) <= 1e-6);
}

TEST_CASE("the GPU Adam and AdamW updates match the CPU", "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  std::mt19937 gen(3);
  const Shape shape{1000, 33};
  Tensor lr(Shape{}), step(Shape{});
  lr.fill(0.001f);
  step.fill(7.0f);
  Tensor v = random_tensor(shape, gen);
  for (int64_t i = 0; i < v.count(); ++i) v.mutable_data()[i] *= v.data()[i];  // v >= 0
  for (int64_t decoupled : {0, 1}) {
    INFO("decoupled " << decoupled);
    CHECK(parity_error("adam_update", Attrs().set("weight_decay", 0.01).set("decoupled", decoupled),
                       {random_tensor(shape, gen), random_tensor(shape, gen),
                        random_tensor(shape, gen), v, lr, step}) <= 1e-5);
  }
  // 30 weights in one op (graphs/fusion.hpp): two launches, an empty weight skipped; each weight
  // as its own op would give it, bit for bit.
  const Attrs attrs = Attrs().set("weight_decay", 0.01).set("decoupled", int64_t{1});
  std::vector<Tensor> inputs;
  for (int k = 0; k < 30; ++k) {
    const Shape weight = k == 11 ? Shape{0} : Shape{1 + 89 * k % 1000, 5};
    for (int role = 0; role < 4; ++role) inputs.push_back(random_tensor(weight, gen));
    Tensor& second = inputs.back();
    for (int64_t i = 0; i < second.count(); ++i) second.mutable_data()[i] *= second.data()[i];
  }
  inputs.push_back(lr);
  inputs.push_back(step);
  const std::vector<std::vector<float>> together = run_op("adam_update", attrs, inputs, true);
  REQUIRE(together.size() == 90);
  for (int k = 0; k < 30; ++k) {
    INFO("weight " << k);
    const std::vector<std::vector<float>> alone = run_op(
        "adam_update", attrs,
        {inputs[4 * k], inputs[4 * k + 1], inputs[4 * k + 2], inputs[4 * k + 3], lr, step}, true);
    for (int r = 0; r < 3; ++r) CHECK(together[3 * k + r] == alone[r]);
  }
  CHECK(parity_error("adam_update", attrs, inputs) <= 1e-5);
}

TEST_CASE("the GPU clipping ops match the CPU", "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  std::mt19937 gen(4);
  const Tensor x = random_tensor(Shape{1000, 37}, gen);
  CHECK(parity_error("sum_squares", {}, {x}) <= 1e-6);
  Tensor s0(Shape{}), s1(Shape{});
  s0.fill(30.0f);
  s1.fill(70.0f);
  CHECK(parity_error("clip_scale", Attrs().set("max_norm", 2.0), {s0, s1}) <= 1e-6);
  CHECK(parity_error("scale_by", {}, {x, s0}) <= 1e-6);
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

TEST_CASE("the GPU inner product with its bias (and ReLU) in cuBLASLt's epilogue matches the CPU",
          "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  // cuBLAS's pedantic math, and the default (FP32 without TF32), which training runs.
  const GpuMath math = GENERATE(GpuMath::kExact, GpuMath::kFp32);
  const ScopedGpuMath scoped(math);
  std::mt19937 gen(12);
  // mlp's and convnet's shapes, an odd one, a flattened x.
  const std::vector<std::vector<Shape>> cases = {{{64, 784}, {256, 784}, {256}},
                                                 {{64, 256}, {10, 256}, {10}},
                                                 {{7, 33}, {5, 33}, {5}},
                                                 {{16, 8, 3, 3}, {12, 72}, {12}}};
  for (const auto& shapes : cases) {
    for (int64_t relu : {0, 1}) {
      INFO("x " << shapes[0] << ", relu " << relu << ", math " << static_cast<int>(math));
      std::vector<Tensor> inputs;
      for (const Shape& s : shapes) inputs.push_back(random_tensor(s, gen));
      const Attrs attrs = Attrs().set("relu", relu);
      CHECK(parity_error("inner_product_bias", attrs, inputs) <= 1e-4);
      CHECK(gpu_repeats_bits("inner_product_bias", attrs, inputs));
    }
  }
}

TEST_CASE("loss, accuracy, softmax, bias and inner product GPU kernels match the CPU",
          "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  std::mt19937 gen(4);
  Tensor labels({32});
  for (int i = 0; i < 32; ++i) labels.mutable_data()[i] = float(i % 10);
  const Tensor logits = random_tensor({32, 10}, gen);
  CHECK(parity_error("softmax_cross_entropy", {}, {logits, labels}) <= 1e-5);
  CHECK(parity_error("accuracy", Attrs().set("top_k", int64_t{3}), {logits, labels}) == 0);
  Tensor dloss(Shape{});
  dloss.fill(1.0f);
  const Tensor probs = random_tensor({32, 10}, gen, 0.0f, 1.0f);
  CHECK(parity_error("softmax_cross_entropy_grad", {}, {probs, labels, dloss}) <= 1e-6);
  CHECK(parity_error("softmax", {}, {random_tensor({4, 6, 5}, gen)}) <= 1e-5);
  CHECK(parity_error("softmax", Attrs().set("axis", int64_t{-1}),
                     {random_tensor({4, 6, 5}, gen)}) <= 1e-5);
  CHECK(parity_error("softmax_grad", {},
                     {random_tensor({4, 6, 5}, gen, 0, 1), random_tensor({4, 6, 5}, gen)}) <= 1e-5);
  CHECK(parity_error("bias", {}, {random_tensor({8, 6, 3, 3}, gen), random_tensor({6}, gen)}) == 0);
  CHECK(parity_error("bias_grad", {}, {random_tensor({8, 6, 3, 3}, gen)}) <= 1e-5);
  const Tensor x = random_tensor({16, 3, 4, 5}, gen), w = random_tensor({7, 60}, gen);
  CHECK(parity_error("inner_product", {}, {x, w}) <= 1e-4);
  const Tensor dy = random_tensor({16, 7}, gen);
  CHECK(parity_error("inner_product_grad_data", {}, {dy, w, x}) <= 1e-4);
  CHECK(parity_error("inner_product_grad_weight", {}, {dy, x}) <= 1e-4);
}

TEST_CASE("convolution, pooling, LRN and batch norm GPU kernels match the CPU", "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  const ScopedGpuMath exact(GpuMath::kExact);
  std::mt19937 gen(5);
  const Tensor x = random_tensor({4, 3, 12, 12}, gen), w = random_tensor({8, 3, 5, 5}, gen);
  const Attrs conv = Attrs().set("pad", int64_t{2}).set("stride", int64_t{1});
  CHECK(parity_error("conv", conv, {x, w}) <= 1e-4);
  const Tensor dy = random_tensor({4, 8, 12, 12}, gen);
  CHECK(parity_error("conv_grad_data", conv, {dy, w, x}) <= 1e-4);
  CHECK(parity_error("conv_grad_weight", conv, {dy, x, w}) <= 1e-4);
  for (const char* mode : {"max", "avg"}) {
    INFO(mode);
    const Attrs pool = Attrs()
                           .set("mode", std::string(mode))
                           .set("kernel", int64_t{3})
                           .set("stride", int64_t{2})
                           .set("pad", int64_t{1});
    CHECK(parity_error("pool", pool, {x}) <= 1e-5);
    std::unique_ptr<Operator> op = OperatorRegistry::create("pool", pool);
    Tensor y(op->infer_shapes({x.shape()})[0]);
    OpContext none;
    std::vector<Tensor*> outs{&y};
    op->compute({&x}, outs, none);
    CHECK(parity_error("pool_grad", pool, {x, y, random_tensor(y.shape(), gen)}) <= 1e-5);
  }
  const Attrs lrn = Attrs().set("size", int64_t{5}).set("alpha", 1e-2).set("beta", 0.75);
  CHECK(parity_error("lrn", lrn, {x}) <= 1e-4);
  std::unique_ptr<Operator> lrn_op = OperatorRegistry::create("lrn", lrn);
  Tensor lrn_y(x.shape());
  OpContext none;
  std::vector<Tensor*> lrn_outs{&lrn_y};
  lrn_op->compute({&x}, lrn_outs, none);
  CHECK(parity_error("lrn_grad", lrn, {x, lrn_y, random_tensor(x.shape(), gen)}) <= 1e-4);
  const Tensor gamma = random_tensor({3}, gen), beta = random_tensor({3}, gen);
  const Tensor mean = random_tensor({3}, gen), var = random_tensor({3}, gen, 0.5f, 2.0f);
  for (const char* mode : {"train", "test"}) {
    INFO(mode);
    const Attrs bn = Attrs().set("mode", std::string(mode));
    CHECK(parity_error("batch_norm", bn, {x, gamma, beta, mean, var}) <= 1e-4);
    const Tensor inv_std = random_tensor({3}, gen, 0.5f, 2.0f);
    CHECK(parity_error("batch_norm_grad", bn,
                       {x, gamma, mean, inv_std, random_tensor(x.shape(), gen)}) <= 1e-4);
  }
}

TEST_CASE("GPU conv_bias_relu matches the CPU and the GPU's conv then bias then relu",
          "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  const ScopedGpuMath exact(GpuMath::kExact);
  std::mt19937 gen(6);
  // The convnet's second convolution (5x5, pad 2) and a GoogLeNet 1x1 of 192 input channels.
  struct Case {
    Shape x, w;
    int64_t pad;
  };
  for (const Case& c :
       {Case{{4, 32, 14, 14}, {64, 32, 5, 5}, 2}, Case{{4, 192, 7, 7}, {64, 192, 1, 1}, 0}}) {
    INFO("x " << c.x << ", w " << c.w);
    const Tensor x = random_tensor(c.x, gen), w = random_tensor(c.w, gen),
                 b = random_tensor({c.w[0]}, gen);
    const Attrs conv = Attrs().set("pad", c.pad);
    CHECK(parity_error("conv_bias_relu", conv, {x, w, b}) <= 1e-4);
    // On the GPU, fused against unfused: cuDNN's fused kernel may sum in another order than the
    // plain forward, so a float rounding apart, not bit for bit (reported when they differ).
    const Tensor fused = op_output("conv_bias_relu", conv, {x, w, b}, true);
    const Tensor z = op_output("conv", conv, {x, w}, true);
    const Tensor unfused = op_output("relu", {}, {op_output("bias", {}, {z, b}, true)}, true);
    REQUIRE(fused.count() == unfused.count());
    double worst = 0;
    for (int64_t i = 0; i < fused.count(); ++i)
      worst = std::max(worst, std::abs(double(fused.data()[i]) - unfused.data()[i]) /
                                  std::max(1.0, std::abs(double(unfused.data()[i]))));
    if (worst > 0) WARN("GPU conv_bias_relu differs from conv, bias, relu by " << worst);
    CHECK(worst <= 1e-5);
    CHECK(gpu_repeats_bits("conv_bias_relu", conv, {x, w, b}));
  }
}

TEST_CASE("concat, split and reshape GPU kernels move every value", "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  std::mt19937 gen(6);
  const Tensor a = random_tensor({4, 2, 3}, gen), b = random_tensor({4, 5, 3}, gen);
  CHECK(parity_error("concat", {}, {a, b}) == 0);
  CHECK(parity_error("split", Attrs().set("sizes", std::vector<int64_t>{2, 5}),
                     {random_tensor({4, 7, 3}, gen)}) == 0);
  CHECK(parity_error("reshape", Attrs().set("shape", std::vector<int64_t>{12, -1}), {b}) == 0);
}

TEST_CASE("GPU dropout keeps 1 - ratio of the elements, the CPU's ones for the same generator",
          "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  std::unique_ptr<Operator> op = OperatorRegistry::create("dropout", Attrs().set("ratio", 0.25));
  Tensor x({100, 100});
  x.fill(1.0f);
  const Tensor gx = on_gpu(x);
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    Tensor y({100, 100}, Location::gpu(0)), mask({100, 100}, Location::gpu(0));
    Rng rng(11);
    run_on_gpu(*op, {&gx}, {&y, &mask}, &rng);
    const std::vector<float> values = y.values();
    int kept = 0;
    for (float v : values) {
      REQUIRE((v == 0.0f || v == Approx(1.0f / 0.75f)));
      kept += v != 0.0f;
    }
    CHECK(kept == Approx(7500).margin(300));
    if (run == 0)
      first = values;
    else
      CHECK(values == first);
  }
  // The CPU kernel draws from the same counter-based stream: the same masks, bit for bit.
  Tensor y({100, 100}), mask({100, 100});
  Rng rng(11);
  OpContext context(&rng);
  op->compute({&x}, {&y, &mask}, context);
  CHECK(y.values() == first);
}

// Regression: pool described N x C planes to cuDNN as N * C images of one channel, and cuDNN
// refuses a batch of 65,536 or more (GoogLeNet at batch 128 failed with NOT_SUPPORTED).
TEST_CASE("GPU pooling of N * C >= 65,536 planes matches the CPU", "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  std::mt19937 gen(8);
  const Tensor x = random_tensor({128, 520, 7, 7}, gen);
  for (const char* mode : {"max", "avg"}) {
    INFO(mode);
    const Attrs pool = Attrs()
                           .set("mode", std::string(mode))
                           .set("kernel", int64_t{3})
                           .set("stride", int64_t{1})
                           .set("pad", int64_t{1});
    CHECK(parity_error("pool", pool, {x}) <= 1e-5);
    const Tensor y = tensor_of(run_op("pool", pool, {x}, false)[0], x.shape());
    CHECK(parity_error("pool_grad", pool, {x, y, random_tensor(x.shape(), gen)}) <= 1e-5);
  }
}

// Shapes with one or several stage-1 blocks per channel (many per channel at 64 x 28 x 28;
// [N, C] takes the column path), odd sample counts, and one channel.
const std::vector<Shape>& channel_shapes() {
  static const std::vector<Shape> shapes{{64, 3, 28, 28}, {17, 5, 3, 3},   {1, 3, 17, 17},
                                         {64, 1000},      {17, 1000},      {1, 1000},
                                         {4096, 7},       {2, 1, 300, 301}};
  return shapes;
}

TEST_CASE("GPU bias gradients over one or many blocks per channel match the CPU, bit-identically",
          "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  std::mt19937 gen(9);
  for (const Shape& shape : channel_shapes()) {
    INFO(shape);
    const Tensor dy = random_tensor(shape, gen);
    // Float sums of up to 90,000 values on the CPU: ~1e-4 of rounding near a zero sum.
    CHECK(parity_error("bias_grad", {}, {dy}) <= 1e-3);
    CHECK(gpu_repeats_bits("bias_grad", {}, {dy}));
    const Tensor b = random_tensor({shape[1]}, gen);
    CHECK(parity_error("bias", {}, {dy, b}) == 0);
    CHECK(parity_error("bias_relu", {}, {dy, b}) == 0);  // so also the GPU's bias then relu
    // relu_grad and bias_grad in one kernel: the two kernels' bits.
    const Tensor y = random_tensor(shape, gen);
    const std::vector<std::vector<float>> fused = run_op("bias_relu_grad", {}, {y, dy}, true);
    const std::vector<float> dx = run_op("relu_grad", {}, {y, dy}, true)[0];
    CHECK(fused[0] == dx);
    CHECK(fused[1] == run_op("bias_grad", {}, {tensor_of(dx, shape)}, true)[0]);
  }
}

TEST_CASE("GPU batch norm over many blocks per channel matches the CPU, bit-identically",
          "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  std::mt19937 gen(10);
  for (const Shape& shape : channel_shapes()) {
    if (shape[0] * shape.count_from(2) < 2) continue;  // training needs 2 values per channel
    INFO(shape);
    const int64_t c = shape[1];
    const Tensor x = random_tensor(shape, gen, -1.0f, 3.0f), dy = random_tensor(shape, gen);
    const Tensor gamma = random_tensor({c}, gen), beta = random_tensor({c}, gen);
    const Tensor mean = random_tensor({c}, gen), var = random_tensor({c}, gen, 0.5f, 2.0f);
    for (const char* mode : {"train", "test"}) {
      INFO(mode);
      const Attrs bn = Attrs().set("mode", std::string(mode));
      const std::vector<Tensor> in{x, gamma, beta, mean, var};
      CHECK(parity_error("batch_norm", bn, in) <= 1e-4);
      CHECK(gpu_repeats_bits("batch_norm", bn, in));
      // The gradient at the CPU's own statistics (its outputs 1 and 2).
      const std::vector<std::vector<float>> stats = run_op("batch_norm", bn, in, false);
      const std::vector<Tensor> grad_in{x, gamma, tensor_of(stats[1], {c}),
                                        tensor_of(stats[2], {c}), dy};
      CHECK(parity_error("batch_norm_grad", bn, grad_in) <= 1e-3);  // dbeta: as bias_grad
      CHECK(gpu_repeats_bits("batch_norm_grad", bn, grad_in));
      // Fused with a ReLU: the same checks, and the GPU's own unfused chain's bits.
      CHECK(parity_error("batch_norm_relu", bn, in) <= 1e-4);
      CHECK(gpu_repeats_bits("batch_norm_relu", bn, in));
      const std::vector<std::vector<float>> fused = run_op("batch_norm_relu", bn, in, true);
      const std::vector<float> y =
          run_op("relu", {}, {tensor_of(run_op("batch_norm", bn, in, true)[0], shape)}, true)[0];
      CHECK(fused[0] == y);
      const std::vector<Tensor> relu_grad_in{
          x, gamma, tensor_of(stats[1], {c}), tensor_of(stats[2], {c}), tensor_of(y, shape), dy};
      CHECK(parity_error("batch_norm_relu_grad", bn, relu_grad_in) <= 1e-3);
      CHECK(gpu_repeats_bits("batch_norm_relu_grad", bn, relu_grad_in));
      const Tensor masked =
          tensor_of(run_op("relu_grad", {}, {tensor_of(y, shape), dy}, true)[0], shape);
      CHECK(run_op("batch_norm_relu_grad", bn, relu_grad_in, true) ==
            run_op("batch_norm_grad", bn,
                   {x, gamma, tensor_of(stats[1], {c}), tensor_of(stats[2], {c}), masked}, true));
    }
  }
}

TEST_CASE("GPU synchronized batch norm pieces match the CPU, bit-identically", "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  std::mt19937 gen(12);
  for (const Shape& shape : channel_shapes()) {
    if (shape[0] * shape.count_from(2) < 2) continue;  // training needs 2 values per channel
    INFO(shape);
    const int64_t c = shape[1];
    const Tensor x = random_tensor(shape, gen, -1.0f, 3.0f), dy = random_tensor(shape, gen);
    const Tensor gamma = random_tensor({c}, gen), beta = random_tensor({c}, gen);
    const Tensor mean = random_tensor({c}, gen), var = random_tensor({c}, gen, 0.5f, 2.0f);
    // Each piece at the CPU's inputs, the totals those of one replica.
    CHECK(parity_error("batch_norm_sums", {}, {x}) <= 1e-4);
    CHECK(gpu_repeats_bits("batch_norm_sums", {}, {x}));
    const Tensor sums = tensor_of(run_op("batch_norm_sums", {}, {x}, false)[0], {c + 1});
    CHECK(parity_error("batch_norm_square_sums", {}, {x, sums}) <= 1e-4);
    CHECK(gpu_repeats_bits("batch_norm_square_sums", {}, {x, sums}));
    const Tensor squares =
        tensor_of(run_op("batch_norm_square_sums", {}, {x, sums}, false)[0], {c + 1});
    const std::vector<Tensor> in{x, gamma, beta, mean, var, sums, squares};
    CHECK(parity_error("sync_batch_norm", {}, in) <= 1e-4);
    CHECK(gpu_repeats_bits("sync_batch_norm", {}, in));
    const std::vector<std::vector<float>> stats = run_op("sync_batch_norm", {}, in, false);
    const Tensor saved_mean = tensor_of(stats[1], {c}), inv_std = tensor_of(stats[2], {c});
    CHECK(parity_error("batch_norm_grad_sums", {}, {x, saved_mean, dy}) <= 1e-3);
    CHECK(gpu_repeats_bits("batch_norm_grad_sums", {}, {x, saved_mean, dy}));
    const Tensor local =
        tensor_of(run_op("batch_norm_grad_sums", {}, {x, saved_mean, dy}, false)[0], {2 * c + 1});
    const std::vector<Tensor> grad_in{x, gamma, saved_mean, inv_std, dy, local, local};
    CHECK(parity_error("sync_batch_norm_grad", {}, grad_in) <= 1e-3);
    CHECK(gpu_repeats_bits("sync_batch_norm_grad", {}, grad_in));
  }
}

TEST_CASE("GPU softmax, loss and accuracy with a warp per row match the CPU, bit-identically",
          "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  std::mt19937 gen(11);
  Tensor dloss(Shape{});
  dloss.fill(0.7f);
  for (int64_t rows : {1, 17, 64, 5000}) {
    for (int64_t classes : {1, 3, 10, 1000}) {
      if (rows * classes > 1000000) continue;
      INFO(rows << " x " << classes);
      const Tensor logits = random_tensor({rows, classes}, gen, -5.0f, 5.0f);
      const Tensor labels = random_labels(rows, classes, gen);
      CHECK(parity_error("softmax", {}, {logits}) <= 1e-5);
      CHECK(gpu_repeats_bits("softmax", {}, {logits}));
      const Tensor probs = random_tensor({rows, classes}, gen, 0.0f, 1.0f);
      const Tensor dy = random_tensor({rows, classes}, gen);
      // dx = p (dy - p.dy): the dot product's rounding grows with its length on both sides
      // (1.8e-5 apart at 1000 classes on an H200, summed in other orders).
      CHECK(parity_error("softmax_grad", {}, {probs, dy}) <=
            1e-5 * std::max<int64_t>(1, classes / 100));
      CHECK(gpu_repeats_bits("softmax_grad", {}, {probs, dy}));
      CHECK(parity_error("softmax_cross_entropy", {}, {logits, labels}) <= 1e-5);
      CHECK(gpu_repeats_bits("softmax_cross_entropy", {}, {logits, labels}));
      CHECK(parity_error("softmax_cross_entropy_grad", {}, {probs, labels, dloss}) <= 1e-6);
      for (int64_t top_k : {1, 5}) {
        INFO("top " << top_k);
        const Attrs accuracy = Attrs().set("top_k", top_k);
        CHECK(parity_error("accuracy", accuracy, {logits, labels}) == 0);
        CHECK(gpu_repeats_bits("accuracy", accuracy, {logits, labels}));
      }
    }
  }
  // Softmax across the channels of a feature map: a thread per position.
  const Tensor maps = random_tensor({3, 5, 17, 19}, gen);
  CHECK(parity_error("softmax", {}, {maps}) <= 1e-5);
  CHECK(parity_error("softmax_grad", {}, {random_tensor(maps.shape(), gen, 0, 1), maps}) <= 1e-5);
}

TEST_CASE("GPU sum_squares over many blocks matches the CPU, bit-identically", "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  std::mt19937 gen(12);
  for (const Shape& shape : std::vector<Shape>{{1}, {17}, {1000, 37}, {1000, 1000}}) {
    INFO(shape);
    const Tensor x = random_tensor(shape, gen);
    CHECK(parity_error("sum_squares", {}, {x}) <= 1e-6);
    CHECK(gpu_repeats_bits("sum_squares", {}, {x}));
  }
}

TEST_CASE("GPU clip_scale gives the CPU's factor to the bit, past one chunk of inputs",
          "[cuda][gpu]") {
  // The GPU adds its inputs 128 at a time; a running total rounded to float between chunks, or
  // before the square root, changed the factor's last bits against the CPU's double sum.
  PURINE_REQUIRE_GPU();
  std::mt19937 gen(13);
  std::uniform_real_distribution<float> sum_of(0.1f, 1000.0f);
  std::vector<Tensor> sums;
  for (int i = 0; i < 300; ++i) {
    sums.emplace_back(Shape{});
    sums.back().fill(sum_of(gen));
  }
  // Rounding the total to float changed the factor for 9 of these 96 cases (checked on the host).
  for (const int count : {3, 128, 129, 300}) {
    const std::vector<Tensor> inputs(sums.begin(), sums.begin() + count);
    for (int k = 1; k <= 24; ++k) {
      INFO(count << " inputs, max_norm " << 0.37 * k);
      CHECK(parity_error("clip_scale", Attrs().set("max_norm", 0.37 * k), inputs) == 0);
    }
  }
}

TEST_CASE("the CUDA backend registers a GPU kernel for the operators it covers",
          "[cuda][registry]") {
  // Runs without a GPU too: the kernels are registered whenever the backend is built.
  if (!device_runtime()) {
    WARN("skipped: this build has no CUDA backend");
    return;
  }
  // Every registered operator has one but the host-only ones: the data sources (they read files
  // or serve host memory; their batches are copied over) and the MPI allreduce (it reduces host
  // buffers; GPU gradients reach it through copies).
  for (const std::string& type : OperatorRegistry::names()) {
    INFO(type);
    if (type == "idx_data" || type == "synthetic_data" || type == "mpi_allreduce") continue;
    if (type.rfind("test_", 0) == 0) continue;  // registered by this test binary
    CHECK(GpuKernels::find(type) != nullptr);
  }
}

}  // namespace purine::testing
