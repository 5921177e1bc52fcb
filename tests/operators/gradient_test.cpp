#include "tests/operators/gradient_test.hpp"

#include <algorithm>
#include <catch2/catch.hpp>

#include "operators/registry.hpp"

namespace purine::testing {

Tensor random_tensor(const Shape& shape, Rng& rng, float low, float high) {
  Tensor t(shape);
  float* p = t.mutable_data();
  for (int64_t i = 0; i < t.count(); ++i) p[i] = rng.uniform(low, high);
  return t;
}

Tensor tensor_of(const Shape& shape, const std::vector<float>& values) {
  Tensor t(shape);
  REQUIRE(static_cast<int64_t>(values.size()) == t.count());
  std::copy(values.begin(), values.end(), t.mutable_data());
  return t;
}

std::vector<Tensor> run_forward(const std::string& type, const Attrs& attrs,
                                const std::vector<Tensor>& inputs, uint64_t rng_seed) {
  auto op = OperatorRegistry::create(type, attrs);
  std::vector<Shape> shapes;
  std::vector<const Tensor*> in;
  for (const Tensor& t : inputs) {
    shapes.push_back(t.shape());
    in.push_back(&t);
  }
  std::vector<Tensor> outputs;
  for (const Shape& s : op->infer_shapes(shapes)) outputs.emplace_back(s);
  std::vector<Tensor*> out;
  for (Tensor& t : outputs) out.push_back(&t);
  Rng rng(rng_seed);
  OpContext context{&rng};
  op->compute(in, out, context);
  return outputs;
}

namespace {
bool takes_block(const Shape& shape, int block) {
  return shape.ndim() == 4 && shape[1] % block == 0;
}
}  // namespace

std::vector<Tensor> run_forward_blocked(const std::string& type, const Attrs& attrs,
                                        const std::vector<Tensor>& inputs, int block,
                                        int* blocked) {
  auto op = OperatorRegistry::create(type, attrs);
  std::vector<Shape> shapes;
  for (const Tensor& t : inputs) shapes.push_back(t.shape());
  const ChannelBlocking blocking = op->channel_blocking(shapes, block);
  const auto listed = [](const std::vector<int>& list, size_t i) {
    return std::find(list.begin(), list.end(), static_cast<int>(i)) != list.end();
  };
  int count = 0;
  std::vector<Tensor> given;
  for (size_t i = 0; i < inputs.size(); ++i) {
    given.emplace_back(inputs[i].shape());
    if (listed(blocking.inputs, i) && takes_block(inputs[i].shape(), block)) {
      given.back().set_channel_block(block);
      ++count;
    }
    given.back().copy_from(inputs[i]);
  }
  std::vector<const Tensor*> in;
  for (const Tensor& t : given) in.push_back(&t);
  std::vector<Tensor> outputs;
  for (const Shape& s : op->infer_shapes(shapes)) {
    outputs.emplace_back(s);
    if (listed(blocking.outputs, outputs.size() - 1) && takes_block(s, block)) {
      outputs.back().set_channel_block(block);
      ++count;
    }
  }
  std::vector<Tensor*> out;
  for (Tensor& t : outputs) out.push_back(&t);
  Rng rng(7);
  OpContext context{&rng};
  op->compute(in, out, context);
  if (blocked) *blocked = count;
  return outputs;
}

void check_gradient(const std::string& type, const Attrs& attrs, std::vector<Tensor> inputs,
                    const GradientCheckOptions& options) {
  const GradientCheckResult result = check_operator_gradient(type, attrs, inputs, options);
  INFO(result.describe());
  CHECK(result.passed());
}

}  // namespace purine::testing
