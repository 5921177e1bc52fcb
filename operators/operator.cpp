#include "operators/operator.hpp"

#include <glog/logging.h>

#include <thread>

#include "base/device_runtime.hpp"
#include "base/error.hpp"
#include "operators/gpu_kernel.hpp"

namespace purine {

void run_to_completion(AsyncWork& work) {
  work.start();
  while (!work.done()) std::this_thread::yield();
}

ChannelBlocking ChannelBlocking::make(Kind kind, std::vector<int> inputs, std::vector<int> outputs,
                                      std::vector<int> shape_only) {
  ChannelBlocking blocking;
  blocking.kind = kind;
  blocking.inputs = std::move(inputs);
  blocking.outputs = std::move(outputs);
  blocking.shape_only = std::move(shape_only);
  return blocking;
}

ChannelBlocking ChannelBlocking::uniform_all(int inputs, int outputs) {
  ChannelBlocking blocking = make(kUniform, {}, {});
  for (int i = 0; i < inputs; ++i) blocking.inputs.push_back(i);
  for (int i = 0; i < outputs; ++i) blocking.outputs.push_back(i);
  return blocking;
}

GradientSpec Operator::gradient() const {
  throw Error(str("operator '", type(), "' has no gradient"));
}

void Operator::check_counts(size_t inputs, size_t outputs) const {
  auto check = [&](int expected, size_t actual, const char* what) {
    if (expected == kVariadic) {
      require(actual >= 1, type(), ": expected at least one ", what, ", got none");
    } else {
      require(actual == static_cast<size_t>(expected), type(), ": expected ", expected, " ", what,
              (expected == 1 ? "" : "s"), ", got ", actual);
    }
  };
  check(num_inputs(), inputs, "input");
  check(num_outputs(), outputs, "output");
}

std::vector<Shape> Operator::infer_shapes(const std::vector<Shape>& inputs) const {
  const int declared = num_outputs();
  check_counts(inputs.size(), declared == kVariadic ? 1 : declared);
  return output_shapes(inputs);
}

void Operator::compute(const std::vector<const Tensor*>& inputs,
                       const std::vector<Tensor*>& outputs, OpContext& context) {
  check_counts(inputs.size(), outputs.size());
  std::vector<Shape> in_shapes;
  in_shapes.reserve(inputs.size());
  for (const Tensor* t : inputs) in_shapes.push_back(t->shape());
  std::vector<Shape> expected = output_shapes(in_shapes);
  Location where = outputs.empty() ? Location::cpu() : outputs[0]->location();
  for (size_t i = 0; i < outputs.size(); ++i) {
    require(outputs[i]->shape() == expected[i], type(), ": output ", i, " has shape ",
            outputs[i]->shape(), ", expected ", expected[i]);
    require(outputs[i]->location() == where, type(), ": output ", i, " is at ",
            outputs[i]->location(), ", output 0 at ", where);
  }
  const OperatorTraits own_traits = traits();
  const bool bridges = own_traits.bridges_locations;
  for (size_t i = 0; i < inputs.size() && !bridges; ++i) {
    require(inputs[i]->location() == where, type(), ": input ", i, " is at ", inputs[i]->location(),
            " but the outputs are at ", where, "; insert a Copy to bring it there");
  }
  require(!uses_rng() || context.rng != nullptr, type(), ": needs a random generator");
  // A copy from a GPU to the host is the GPU's work too (its stream does the transfer).
  bool on_gpu = !where.is_cpu();
  for (size_t i = 0; i < inputs.size() && bridges; ++i)
    on_gpu = on_gpu || !inputs[i]->location().is_cpu();
  if (on_gpu || !own_traits.strided_on_cpu) require_contiguous(inputs, outputs, on_gpu);
  if (on_gpu) {
    compute_gpu(inputs, outputs, context);
  } else {
    compute_cpu(inputs, outputs, context);
  }
}

void Operator::require_contiguous(const std::vector<const Tensor*>& inputs,
                                  const std::vector<Tensor*>& outputs, bool on_gpu) const {
  const auto check = [&](const Tensor& t, const char* role, size_t i) {
    if (t.is_contiguous()) return;  // the message only when it fails
    throw Error(str(type(), ": ", role, " ", i, " is a strided view of shape ", t.shape(), "; ",
                    on_gpu ? "a GPU kernel" : "its CPU kernel", " needs contiguous tensors"));
  };
  for (size_t i = 0; i < inputs.size(); ++i) check(*inputs[i], "input", i);
  for (size_t i = 0; i < outputs.size(); ++i) check(*outputs[i], "output", i);
}

void Operator::compute_gpu(const std::vector<const Tensor*>& inputs,
                           const std::vector<Tensor*>& outputs, OpContext& context) {
  const DeviceRuntime* runtime = device_runtime();
  if (runtime && runtime->kernels_on_host()) {
    require(context.queue != nullptr, type(), ": an emulated device kernel needs its queue");
    // The op outlives the run; the tensors are kept over the memory they have now, as a real
    // device's kernel keeps its pointers (a swap before the queue runs it must not move them).
    auto in = std::make_shared<std::vector<Tensor>>();
    auto out = std::make_shared<std::vector<Tensor>>();
    for (const Tensor* t : inputs) in->push_back(t->at_current_memory());
    for (const Tensor* t : outputs) out->push_back(t->at_current_memory());
    context.queue->enqueue_host([this, in, out, context]() mutable {
      std::vector<const Tensor*> in_ptrs;
      std::vector<Tensor*> out_ptrs;
      for (const Tensor& t : *in) in_ptrs.push_back(&t);
      for (Tensor& t : *out) out_ptrs.push_back(&t);
      compute_cpu(in_ptrs, out_ptrs, context);
    });
    return;
  }
  const GpuKernel kernel = GpuKernels::find(type());
  if (kernel == nullptr)  // not require(): its message would be built on every launch
    throw Error(str("operator '", type(), "' has no GPU kernel in this build",
                    GpuKernels::types().empty() ? " (" + device_backend_problem() + ")" : "",
                    "; place it on a CPU location"));
  require(context.queue != nullptr, type(), ": a GPU kernel needs its location's device queue");
  kernel(*this, inputs, outputs, context);
}

void Operator::prepare(const std::vector<const Tensor*>& inputs,
                       const std::vector<Tensor*>& outputs, const OpContext& context) const {
  if (outputs.empty() || !outputs[0] || outputs[0]->location().is_cpu()) return;
  const DeviceRuntime* runtime = device_runtime();
  if (runtime && runtime->kernels_on_host()) return;  // CPU kernels need no set-up
  if (const GpuPrepare setup = GpuKernels::find_prepare(type()))
    setup(*this, inputs, outputs, context);
}

std::vector<Shape> SameShapeOp::output_shapes(const std::vector<Shape>& inputs) const {
  const int outputs = num_outputs();
  CHECK_GE(outputs, 0) << type() << ": a SameShapeOp declares a fixed number of outputs";
  check_counts(inputs.size(), outputs);
  CHECK(!inputs.empty()) << type() << ": a SameShapeOp needs an input to take the shape of";
  const std::vector<std::string> names = input_names();
  CHECK(names.empty() || names.size() == inputs.size())
      << type() << ": input_names() gives " << names.size() << " names for " << inputs.size()
      << " inputs";
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (names.empty()) {
      require(inputs[i] == inputs[0], type(), ": input ", i, " has shape ", inputs[i],
              ", expected input 0's shape ", inputs[0], " (no broadcasting)");
    } else {
      require(inputs[i] == inputs[0], type(), ": input ", i, " (", names[i], ") has shape ",
              inputs[i], ", expected input 0's (", names[0], ") shape ", inputs[0]);
    }
  }
  return std::vector<Shape>(static_cast<size_t>(outputs), inputs[0]);
}

}  // namespace purine
