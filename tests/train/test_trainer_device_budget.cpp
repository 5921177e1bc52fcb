// What a training iteration at a GPU location asks of the device runtime, on emulated devices
// (dispatcher/emulated_devices.hpp): after the first iterations nothing waits for the device,
// reads device memory on the host or allocates (the loss, the divergence check's count and the
// learning rate travel by copies inside the graph, on the device's streams). The same runs
// follow the CPU's bit for bit, since the emulated device runs the CPU kernels. And no run that
// converges reads its blobs on the host to look for a non-finite one.
#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "base/device_runtime.hpp"
#include "dispatcher/emulated_devices.hpp"
#include "operators/cuda/gpu_test.hpp"
#include "operators/kernel_determinism.hpp"
#include "purine/serialize.hpp"
#include "temp_dir.hpp"
#include "train/trainer.hpp"

using namespace purine;

namespace {

TrainOptions small_run(const std::string& model, Optimizer optimizer) {
  TrainOptions o;
  o.model = model;
  o.data_dir = "synthetic:1x28x28:10";
  o.batch = 16;
  o.max_iters = 6;
  o.lr = 0.01;
  o.optimizer = optimizer;
  o.threads = 1;
  o.seed = 3;
  o.evaluate = false;
  return o;
}

struct Budget {
  DeviceCounters after_warm_up, at_end;
  TrainResult result;
};

// Trains `o` on GPU 0 of `runtime`, noting its counters after iteration 2 and at the end.
Budget train_on_gpu(TrainOptions o, const DeviceRuntime& runtime) {
  o.devices = {0};
  Budget budget;
  Trainer trainer(o);
  budget.result = trainer.train([&](const TrainProgress& p) {
    if (p.iteration == 2) budget.after_warm_up = runtime.counters();
  });
  budget.at_end = runtime.counters();
  return budget;
}

// Iterations 3 to the end asked nothing of the runtime.
void check_steady(const Budget& b) {
  CHECK(b.at_end.synchronizations == b.after_warm_up.synchronizations);
  CHECK(b.at_end.device_to_host_bytes == b.after_warm_up.device_to_host_bytes);
  CHECK(b.at_end.host_to_device_bytes == b.after_warm_up.host_to_device_bytes);
  CHECK(b.at_end.allocations == b.after_warm_up.allocations);
  CHECK(b.result.blame_scans == 0);
}

}  // namespace

TEST_CASE("steady training iterations at a GPU location never wait for the device",
          "[trainer][device][determinism]") {
  dispatch::ScopedEmulatedDevices emulated(1);
  for (const auto& [model, optimizer] : {std::pair<std::string, Optimizer>{"mlp", Optimizer::kSgd},
                                         {"convnet_bn", Optimizer::kAdam},
                                         {"resnet20", Optimizer::kSgd}}) {
    INFO(model);
    const Budget gpu = train_on_gpu(small_run(model, optimizer), emulated.devices());
    // Setting up did use the runtime (the counters count)...
    CHECK(gpu.after_warm_up.allocations > 0);
    CHECK(gpu.after_warm_up.host_to_device_bytes > 0);  // the initial weights
    // ... and iterations 3 to 6 asked nothing of it.
    check_steady(gpu);
    // The same training on the CPU: the same loss, bit for bit.
    const TrainResult cpu = Trainer(small_run(model, optimizer)).train();
    CHECK(cpu.blame_scans == 0);
    CHECK(gpu.result.final_loss == cpu.final_loss);
  }
}

TEST_CASE("GPU replicas with their parameter server on the CPU follow CPU replicas bit for bit",
          "[trainer][device][locations]") {
  // The Purine paper's layout: gradients copied from the GPUs to the host, summed and applied to
  // master weights there, the new weights copied back. Emulated devices run the CPU kernels, so
  // the arithmetic is that of two CPU replicas whose server is replica 0.
  dispatch::ScopedEmulatedDevices emulated(2);
  testing::TempDir dir;
  auto run = [&dir](bool on_gpus) {
    TrainOptions o = small_run("convnet_bn", Optimizer::kSgd);
    o.momentum = 0.9;  // a history per weight, kept by the server
    o.parallel = ParallelLayout::kData;
    o.reduce = Reduction::kParameterServer;
    if (on_gpus)
      o.devices = {0, 1};
    else
      o.locations = 2;
    o.checkpoint_path = dir.file(on_gpus ? "gpus" : "cpus");
    Trainer trainer(o);
    std::vector<double> losses;
    trainer.train([&](const TrainProgress& p) { losses.push_back(p.loss); });
    return losses;
  };
  const std::vector<double> gpus = run(true);
  REQUIRE(gpus.size() == 6);
  CHECK(gpus == run(false));
  // The checkpoints hold the same tensors: the weights, and the momentum the server kept.
  std::map<std::string, std::string> cpu_tensors;
  const proto::Checkpoint from_cpus = read_checkpoint(dir.file("cpus"), 1 << 30);
  for (const auto& t : from_cpus.tensors()) cpu_tensors[t.name()] = t.tensor().SerializeAsString();
  const proto::Checkpoint from_gpus = read_checkpoint(dir.file("gpus"), 1 << 30);
  CHECK(from_gpus.tensors_size() == static_cast<int>(cpu_tensors.size()));
  int histories = 0;
  for (const auto& t : from_gpus.tensors()) {
    INFO(t.name());
    CHECK(cpu_tensors[t.name()] == t.tensor().SerializeAsString());
    histories += t.name().find("::history") != std::string::npos;
  }
  CHECK(histories > 0);
}

TEST_CASE("a trainer sets the GPU math and the kernel determinism of its options",
          "[trainer][device]") {
  TrainOptions o = small_run("mlp", Optimizer::kSgd);
  o.math = GpuMath::kTf32;
  o.deterministic = false;
  Trainer tf32(o);
  CHECK(gpu_math() == GpuMath::kTf32);
  CHECK_FALSE(deterministic_kernels());
  o.math = GpuMath::kFp32;
  o.deterministic = true;
  Trainer fp32(o);
  CHECK(gpu_math() == GpuMath::kFp32);
  CHECK(deterministic_kernels());
}

TEST_CASE("steady training iterations on a real GPU never wait for it", "[trainer][gpu]") {
  PURINE_REQUIRE_GPU();
  for (const auto& [model, optimizer] : {std::pair<std::string, Optimizer>{"mlp", Optimizer::kSgd},
                                         {"convnet_bn", Optimizer::kAdam},
                                         {"resnet20", Optimizer::kSgd}}) {
    INFO(model);
    const Budget gpu = train_on_gpu(small_run(model, optimizer), *device_runtime());
    check_steady(gpu);
    // Other kernels than the CPU's: the same loss up to float rounding.
    const TrainResult cpu = Trainer(small_run(model, optimizer)).train();
    CHECK(gpu.result.final_loss == Approx(cpu.final_loss).epsilon(1e-3));
  }
}
