// count_non_finite on a GPU (operators/cuda/finite.cu): the same count as the CPU kernel over
// many inputs (more than one launch's chunk of them), large and small. Skipped without a GPU.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "gpu_test.hpp"
#include "operators/registry.hpp"

namespace purine::testing {

TEST_CASE("the GPU count of non-finite values matches the CPU's", "[cuda][gpu]") {
  PURINE_REQUIRE_GPU();
  std::unique_ptr<Operator> op = OperatorRegistry::create("count_non_finite", {});
  // 40 inputs (two launches), of 1 to ~2 million elements, with NaN and infinities spread.
  std::vector<Tensor> host, device;
  int64_t expected = 0;
  for (int i = 0; i < 40; ++i) {
    Tensor t(Shape{i % 7 == 0 ? 2000003 : 1 + 97 * i});
    t.fill(0.25f);
    float* p = t.mutable_data();
    for (int64_t k = i; k < t.count(); k += 9973 + i) {
      p[k] = k % 3 == 0 ? std::numeric_limits<float>::quiet_NaN()
                        : (k % 3 == 1 ? INFINITY : -INFINITY);
      ++expected;
    }
    host.push_back(std::move(t));
  }
  for (const Tensor& t : host) device.push_back(on_gpu(t));
  std::vector<const Tensor*> inputs;
  for (const Tensor& t : device) inputs.push_back(&t);
  Tensor count(Shape{}, Location::gpu(0));
  std::vector<Tensor*> outputs{&count};
  run_on_gpu(*op, inputs, outputs);
  CHECK(count.values().at(0) == static_cast<float>(expected));
  // A second run starts from zero again.
  run_on_gpu(*op, inputs, outputs);
  CHECK(count.values().at(0) == static_cast<float>(expected));
}

}  // namespace purine::testing
