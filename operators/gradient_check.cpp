#include "operators/gradient_check.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "base/device_runtime.hpp"
#include "base/error.hpp"
#include "base/rng.hpp"
#include "operators/operator.hpp"
#include "operators/registry.hpp"

namespace purine {
namespace {

// Runs operators at one location: on the CPU directly, on a GPU on a queue of its own, waiting
// for each op (a checker runs a handful of small ops; overlap does not matter here).
class OpRunner {
 public:
  OpRunner(const Location& location, uint64_t seed) : location_(location), seed_(seed) {
    if (location.is_cpu()) return;
    DeviceRuntime* runtime = device_runtime();
    require(runtime != nullptr, "gradient check at ", location, ": ", device_backend_problem());
    require(location.device < runtime->device_count(), "gradient check at ", location, ": ",
            runtime->name(), " sees ", runtime->device_count(), " GPU(s)");
    runtime->use_device(location.device);
    queue_ = runtime->make_queue(location.device, "gradient_check");
  }

  // Outputs are allocated at the location. The Rng is re-seeded on every call, so ops that draw
  // random numbers (dropout) draw the same ones in every forward pass and in the gradient.
  std::vector<Tensor> run(Operator& op, const std::vector<const Tensor*>& inputs) const {
    std::vector<Shape> shapes;
    for (const Tensor* t : inputs) shapes.push_back(t->shape());
    std::vector<Tensor> outputs;
    for (const Shape& s : op.infer_shapes(shapes)) outputs.emplace_back(s, location_);
    std::vector<Tensor*> out;
    for (Tensor& t : outputs) out.push_back(&t);
    Rng rng(seed_);
    OpContext context(&rng);
    context.queue = queue_.get();
    op.prepare(inputs, out, context);
    op.compute(inputs, out, context);
    if (queue_) {
      std::unique_ptr<QueueEvent> done = queue_->create_event();
      queue_->record(*done);
      while (!done->done()) std::this_thread::yield();
    }
    return outputs;
  }

  Tensor place(const Tensor& host) const {
    Tensor t(host.shape(), location_);
    t.copy_from(host);
    return t;
  }

 private:
  Location location_;
  uint64_t seed_;
  std::shared_ptr<DeviceQueue> queue_;
};

std::vector<const Tensor*> pointers(const std::vector<Tensor>& tensors) {
  std::vector<const Tensor*> p;
  for (const Tensor& t : tensors) p.push_back(&t);
  return p;
}

double weighted_sum(const std::vector<Tensor>& outputs, const std::vector<std::vector<float>>& r,
                    const std::vector<int>& loss_outputs) {
  double loss = 0;
  for (int j : loss_outputs) {
    const std::vector<float> y = outputs[j].values();
    for (size_t k = 0; k < y.size(); ++k) loss += static_cast<double>(y[k]) * r[j][k];
  }
  return loss;
}

// Executes the operator's GradientSpec; returns the input gradients by input index.
std::map<int, Tensor> run_gradient(const Operator& op, const OpRunner& runner,
                                   const std::vector<Tensor>& inputs,
                                   const std::vector<Tensor>& outputs,
                                   const std::vector<Tensor>& output_grads) {
  std::vector<Shape> input_shapes;
  for (const Tensor& t : inputs) input_shapes.push_back(t.shape());
  const GradientSpec spec = op.gradient_for(input_shapes);
  std::map<int, Tensor> input_grads, temps;
  for (auto [i, j] : spec.aliases) input_grads[i] = output_grads.at(j);
  auto resolve = [&](const GradRef& ref) -> const Tensor* {
    switch (ref.kind) {
      case GradRef::kInput:
        return &inputs.at(ref.index);
      case GradRef::kOutput:
        return &outputs.at(ref.index);
      case GradRef::kOutputGrad:
        return &output_grads.at(ref.index);
      case GradRef::kInputGrad:
        return &input_grads.at(ref.index);
      case GradRef::kTemp:
      case GradRef::kReplicaSum:  // one replica: the temporary itself
        return &temps.at(ref.index);
    }
    throw Error(str("gradient of ", op.type(), ": unknown reference kind"));
  };
  for (const GradOp& g : spec.ops) {
    std::unique_ptr<Operator> kernel = OperatorRegistry::create(g.type, g.attrs);
    std::vector<const Tensor*> in;
    for (const GradRef& r : g.inputs) in.push_back(resolve(r));
    std::vector<Tensor> results = runner.run(*kernel, in);
    require(results.size() == g.outputs.size(), "gradient of ", op.type(), ": op ", g.type,
            " makes ", results.size(), " outputs, the spec names ", g.outputs.size());
    for (size_t k = 0; k < results.size(); ++k) {
      const GradRef& r = g.outputs[k];
      require(r.kind == GradRef::kInputGrad || r.kind == GradRef::kTemp, "gradient of ", op.type(),
              ": op ", g.type, " writes something other than a gradient or temporary");
      (r.kind == GradRef::kInputGrad ? input_grads : temps)[r.index] = results[k];
    }
  }
  for (auto [i, k] : spec.temp_aliases) input_grads[i] = temps.at(k);
  return input_grads;
}

std::vector<int> all_indices(size_t n) {
  std::vector<int> v;
  for (size_t i = 0; i < n; ++i) v.push_back(static_cast<int>(i));
  return v;
}

}  // namespace

std::string GradientCheckResult::describe() const {
  std::ostringstream out;
  out << op_type << " at " << location << ": " << probes << " probes, " << mismatches.size()
      << " mismatch(es), worst relative error " << worst_error << "\n";
  for (size_t m = 0; m < std::min<size_t>(mismatches.size(), 10); ++m) {
    const GradientMismatch& g = mismatches[m];
    out << "  input " << g.input << " element " << g.element << ": analytic " << g.analytic
        << ", numeric " << g.numeric << "\n";
  }
  return out.str();
}

GradientCheckResult check_operator_gradient(const std::string& type, const Attrs& attrs,
                                            const std::vector<Tensor>& host_inputs,
                                            const GradientCheckOptions& options) {
  std::unique_ptr<Operator> op = OperatorRegistry::create(type, attrs);
  require(op->differentiable(), "gradient check: operator '", type, "' declares no gradient");
  const OpRunner runner(options.location, options.seed);

  std::vector<Tensor> inputs;
  for (const Tensor& t : host_inputs) inputs.push_back(runner.place(t));
  const std::vector<Tensor> outputs = runner.run(*op, pointers(inputs));

  const std::vector<int> loss_outputs =
      options.loss_outputs.empty() ? all_indices(outputs.size()) : options.loss_outputs;
  Rng rng(options.seed + 1);
  std::vector<std::vector<float>> r(outputs.size());
  std::vector<Tensor> output_grads;
  for (size_t j = 0; j < outputs.size(); ++j) {
    r[j].assign(outputs[j].count(), 0.0f);
    if (std::find(loss_outputs.begin(), loss_outputs.end(), j) != loss_outputs.end()) {
      for (float& v : r[j]) v = rng.uniform(-1.0f, 1.0f);
    }
    output_grads.emplace_back(outputs[j].shape(), options.location);
    output_grads.back().set_values(r[j]);
  }
  std::map<int, Tensor> analytic = run_gradient(*op, runner, inputs, outputs, output_grads);

  GradientCheckResult result;
  result.op_type = type;
  result.location = options.location;
  std::vector<int> checked = options.checked_inputs;
  if (checked.empty()) {
    for (const auto& entry : analytic) checked.push_back(entry.first);
  }
  for (int i : checked) {
    require(i >= 0 && i < static_cast<int>(inputs.size()), "gradient check of ", type, ": input ",
            i, " does not exist");
    require(analytic.count(i) == 1, "gradient check of ", type, ": its gradient spec gives no ",
            "gradient for input ", i);
    require(analytic[i].shape() == inputs[i].shape(), "gradient check of ", type,
            ": the gradient of input ", i, " has shape ", analytic[i].shape(), ", the input ",
            inputs[i].shape());
    const std::vector<float> got = analytic[i].values();
    std::vector<float> x = host_inputs[i].values();
    const int64_t n = static_cast<int64_t>(x.size());
    const int64_t stride = std::max<int64_t>(1, n / std::max(1, options.max_probes));
    auto loss_at = [&](int64_t k, double value) {
      const float saved = x[k];
      x[k] = static_cast<float>(value);
      inputs[i].set_values(x);
      x[k] = saved;
      return weighted_sum(runner.run(*op, pointers(inputs)), r, loss_outputs);
    };
    for (int64_t k = 0; k < n; k += stride) {
      const double plus = loss_at(k, x[k] + options.step);
      const double minus = loss_at(k, x[k] - options.step);
      const double numeric = (plus - minus) / (2 * options.step);
      const double scale = std::max({1.0, std::fabs(numeric), std::fabs(double(got[k]))});
      const double error = std::fabs(got[k] - numeric) / scale;
      ++result.probes;
      result.worst_error = std::isnan(error) ? INFINITY : std::max(result.worst_error, error);
      if (!(error <= options.tolerance)) result.mismatches.push_back({i, k, got[k], numeric});
    }
    inputs[i].set_values(x);
  }
  return result;
}

}  // namespace purine
