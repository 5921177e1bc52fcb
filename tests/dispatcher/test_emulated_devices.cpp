// EmulatedDevices (dispatcher/emulated_devices.hpp): host memory as device memory, copies that
// wait for the device's queues first and are counted, allocations counted.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>
#include <vector>

#include "dispatcher/emulated_devices.hpp"
#include "dispatcher/emulated_queue.hpp"

using namespace purine;
using namespace purine::dispatch;

TEST_CASE("emulated devices count copies and allocations, and a copy waits for the queues",
          "[emulated]") {
  EmulatedDevices devices(2);
  CHECK(devices.device_count() == 2);
  CHECK(devices.kernels_on_host());
  float* memory = static_cast<float*>(devices.allocate(1, 4 * sizeof(float)));
  CHECK(memory[0] == 0.0f);  // zero-filled, as the CUDA backend's
  CHECK(devices.memory_stats(1).in_use == 4 * sizeof(float));
  CHECK(devices.counters().allocations == 1);

  // Work queued on gpu1 runs before a copy from it returns.
  std::shared_ptr<DeviceQueue> queue = devices.make_queue(1, "gpu1 main");
  std::atomic<bool> ran{false};
  queue->enqueue_host([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    memory[2] = 7.0f;
    ran = true;
  });
  std::vector<float> host(4, -1.0f);
  devices.copy(host.data(), Location::cpu(), memory, Location::gpu(1), 4 * sizeof(float));
  CHECK(ran);
  CHECK(host == std::vector<float>{0.0f, 0.0f, 7.0f, 0.0f});
  host[0] = 3.0f;
  devices.copy(memory, Location::gpu(1), host.data(), Location::cpu(), sizeof(float));
  CHECK(memory[0] == 3.0f);

  const DeviceCounters c = devices.counters();
  CHECK(c.synchronizations == 2);
  CHECK(c.device_to_host_bytes == 4 * sizeof(float));
  CHECK(c.host_to_device_bytes == sizeof(float));
  devices.release(1, memory, 4 * sizeof(float));
  CHECK(devices.memory_stats(1).in_use == 0);
  CHECK_THROWS_WITH(devices.allocate(2, 4), Catch::Contains("no GPU 2"));
}

TEST_CASE("drain returns after the queued work, even after a failure", "[emulated]") {
  EmulatedQueue queue("q");
  int done = 0;
  queue.enqueue([&] { ++done; });
  queue.enqueue([] { throw std::runtime_error("broken"); });
  queue.enqueue([&] { ++done; });  // skipped after the failure
  queue.drain();
  CHECK(done == 1);
}
