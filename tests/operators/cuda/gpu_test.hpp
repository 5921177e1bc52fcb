// What the GPU tests share: whether this process has a GPU (they skip with a message naming why
// when it has none), and running one operator on a GPU stream as the dispatcher would, then
// waiting for it.
#pragma once

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/device_runtime.hpp"
#include "base/tensor.hpp"
#include "operators/gpu_kernel.hpp"
#include "operators/operator.hpp"
#include "operators/registry.hpp"

namespace purine::testing {

// "" when GPU 0 is usable, else why not (for the skip message).
inline std::string no_gpu_reason() {
  const DeviceRuntime* runtime = device_runtime();
  if (!runtime) return "this build has no CUDA backend";
  if (runtime->device_count() == 0) return runtime->name() + " sees no GPU on this machine";
  return "";
}

#define PURINE_REQUIRE_GPU()                                                         \
  do {                                                                               \
    const std::string purine_why = ::purine::testing::no_gpu_reason();               \
    if (!purine_why.empty()) {                                                       \
      WARN("skipped: needs a GPU (" << purine_why << "); run it where one is lent"); \
      return;                                                                        \
    }                                                                                \
  } while (0)

// Runs `op` on GPU 0's stream with the given tensors (any locations the op accepts) and waits.
inline void run_on_gpu(Operator& op, const std::vector<const Tensor*>& inputs,
                       const std::vector<Tensor*>& outputs, Rng* rng = nullptr) {
  DeviceRuntime& runtime = *device_runtime();
  std::shared_ptr<DeviceQueue> stream = runtime.make_queue(0, "test");
  OpContext context(rng);
  context.queue = stream.get();
  op.compute(inputs, outputs, context);
  std::unique_ptr<QueueEvent> done = stream->create_event();
  stream->record(*done);
  while (!done->done()) std::this_thread::yield();
}

// The process's GpuMath set for a scope: tests that compare convolutions with the CPU at float
// rounding run under GpuMath::kExact.
class ScopedGpuMath {
 public:
  explicit ScopedGpuMath(GpuMath math) : saved_(gpu_math()) { set_gpu_math(math); }
  ~ScopedGpuMath() { set_gpu_math(saved_); }
  ScopedGpuMath(const ScopedGpuMath&) = delete;
  ScopedGpuMath& operator=(const ScopedGpuMath&) = delete;

 private:
  GpuMath saved_;
};

// A copy of `t` at GPU 0.
inline Tensor on_gpu(const Tensor& t) {
  Tensor g(t.shape(), Location::gpu(0));
  g.copy_from(t);
  return g;
}

// Output 0 of `type` on host tensors `inputs`, run on the CPU or on GPU 0, as a host tensor.
inline Tensor op_output(const std::string& type, const Attrs& attrs,
                        const std::vector<Tensor>& inputs, bool gpu) {
  std::unique_ptr<Operator> op = OperatorRegistry::create(type, attrs);
  std::vector<Shape> shapes;
  std::vector<Tensor> in;
  for (const Tensor& t : inputs) {
    shapes.push_back(t.shape());
    in.push_back(gpu ? on_gpu(t) : t);
  }
  const Shape out_shape = op->infer_shapes(shapes)[0];
  Tensor out(out_shape, gpu ? Location::gpu(0) : Location::cpu());
  std::vector<const Tensor*> in_ptrs;
  for (const Tensor& t : in) in_ptrs.push_back(&t);
  std::vector<Tensor*> out_ptrs{&out};
  if (gpu) {
    run_on_gpu(*op, in_ptrs, out_ptrs);
  } else {
    OpContext context;
    op->compute(in_ptrs, out_ptrs, context);
  }
  Tensor host(out_shape);
  host.copy_from(out);
  return host;
}

}  // namespace purine::testing
