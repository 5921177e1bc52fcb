#include "tests/operators/gradient_check.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>

#include "base/error.hpp"
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

namespace {

std::vector<Tensor> forward(Operator& op, const std::vector<Tensor>& inputs, uint64_t seed) {
  std::vector<Shape> shapes;
  for (const Tensor& t : inputs) shapes.push_back(t.shape());
  std::vector<Tensor> outputs;
  for (const Shape& s : op.output_shapes(shapes)) outputs.emplace_back(s);
  std::vector<const Tensor*> in;
  std::vector<Tensor*> out;
  for (const Tensor& t : inputs) in.push_back(&t);
  for (Tensor& t : outputs) out.push_back(&t);
  Rng rng(seed);  // re-seeded on every call so random ops repeat their draws
  OpContext context{&rng};
  op.compute(in, out, context);
  return outputs;
}

double weighted_sum(const std::vector<Tensor>& outputs, const std::vector<Tensor>& weights,
                    const std::vector<int>& loss_outputs) {
  double loss = 0;
  for (int j : loss_outputs) {
    const float* y = outputs[j].data();
    const float* r = weights[j].data();
    for (int64_t k = 0; k < outputs[j].count(); ++k) loss += static_cast<double>(y[k]) * r[k];
  }
  return loss;
}

// Executes a GradientSpec on tensors; returns the input gradients by index.
std::map<int, Tensor> run_gradient(const Operator& op, const std::vector<Tensor>& inputs,
                                   const std::vector<Tensor>& outputs,
                                   const std::vector<Tensor>& output_grads, uint64_t seed) {
  std::vector<Shape> input_shapes;
  for (const Tensor& t : inputs) input_shapes.push_back(t.shape());
  GradientSpec spec = op.gradient_for(input_shapes);
  std::map<int, Tensor> input_grads;
  std::map<int, Tensor> temps;
  for (auto [i, j] : spec.aliases) input_grads[i] = output_grads[j];
  auto resolve = [&](const GradRef& ref) -> Tensor* {
    switch (ref.kind) {
      case GradRef::kInput:
        return const_cast<Tensor*>(&inputs.at(ref.index));
      case GradRef::kOutput:
        return const_cast<Tensor*>(&outputs.at(ref.index));
      case GradRef::kOutputGrad:
        return const_cast<Tensor*>(&output_grads.at(ref.index));
      case GradRef::kInputGrad:
        return &input_grads.at(ref.index);
      case GradRef::kTemp:
        return &temps.at(ref.index);
    }
    return nullptr;
  };
  for (const GradOp& g : spec.ops) {
    auto kernel = OperatorRegistry::create(g.type, g.attrs);
    std::vector<const Tensor*> in;
    std::vector<Shape> shapes;
    for (const GradRef& r : g.inputs) {
      in.push_back(resolve(r));
      shapes.push_back(in.back()->shape());
    }
    std::vector<Shape> out_shapes = kernel->output_shapes(shapes);
    REQUIRE(out_shapes.size() == g.outputs.size());
    std::vector<Tensor*> out;
    for (size_t k = 0; k < g.outputs.size(); ++k) {
      const GradRef& r = g.outputs[k];
      REQUIRE((r.kind == GradRef::kInputGrad || r.kind == GradRef::kTemp));
      auto& table = r.kind == GradRef::kInputGrad ? input_grads : temps;
      table[r.index] = Tensor(out_shapes[k]);
      out.push_back(&table[r.index]);
    }
    Rng rng(seed);
    OpContext context{&rng};
    kernel->compute(in, out, context);
  }
  return input_grads;
}

}  // namespace

std::vector<Tensor> run_forward(const std::string& type, const Attrs& attrs,
                                const std::vector<Tensor>& inputs, uint64_t rng_seed) {
  auto op = OperatorRegistry::create(type, attrs);
  return forward(*op, inputs, rng_seed);
}

void check_gradient(const std::string& type, const Attrs& attrs, std::vector<Tensor> inputs,
                    const GradientCheckOptions& options) {
  auto op = OperatorRegistry::create(type, attrs);
  REQUIRE(op->differentiable());
  std::vector<Tensor> outputs = forward(*op, inputs, options.seed);

  std::vector<int> loss_outputs = options.loss_outputs;
  if (loss_outputs.empty()) {
    for (size_t j = 0; j < outputs.size(); ++j) loss_outputs.push_back(static_cast<int>(j));
  }
  Rng rng(options.seed + 1);
  std::vector<Tensor> weights;  // r_j, which is also dL/dy_j
  for (size_t j = 0; j < outputs.size(); ++j) {
    bool in_loss = std::find(loss_outputs.begin(), loss_outputs.end(), j) != loss_outputs.end();
    weights.push_back(in_loss ? random_tensor(outputs[j].shape(), rng)
                              : Tensor(outputs[j].shape()));
  }
  std::map<int, Tensor> analytic = run_gradient(*op, inputs, outputs, weights, options.seed);

  std::vector<int> checked = options.checked_inputs;
  if (checked.empty()) {
    for (const auto& entry : analytic) checked.push_back(entry.first);
  }
  REQUIRE(!checked.empty());
  for (int i : checked) {
    INFO(type << ": gradient of input " << i);
    REQUIRE(analytic.count(i) == 1);
    REQUIRE(analytic[i].shape() == inputs[i].shape());
    int64_t n = inputs[i].count();
    int64_t stride = std::max<int64_t>(1, n / options.max_probes);
    for (int64_t k = 0; k < n; k += stride) {
      float* x = inputs[i].mutable_data() + k;
      const float saved = *x;
      *x = static_cast<float>(saved + options.step);
      double plus = weighted_sum(forward(*op, inputs, options.seed), weights, loss_outputs);
      *x = static_cast<float>(saved - options.step);
      double minus = weighted_sum(forward(*op, inputs, options.seed), weights, loss_outputs);
      *x = saved;
      double numeric = (plus - minus) / (2 * options.step);
      double got = analytic[i].data()[k];
      double scale = std::max({1.0, std::fabs(numeric), std::fabs(got)});
      INFO("element " << k << ": analytic " << got << ", numeric " << numeric);
      CHECK(std::fabs(got - numeric) <= options.tolerance * scale);
    }
  }
}

}  // namespace purine::testing
