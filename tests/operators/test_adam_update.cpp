// adam_update against PyTorch's Adam and AdamW formulas (operators/adam_update.hpp): three steps
// on fixed numbers, the expected values computed once from the formulas in double precision.
#include <omp.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "operators/compute_threads.hpp"
#include "operators/registry.hpp"
#include "tests/operators/gradient_test.hpp"

using namespace purine;
using namespace purine::testing;

namespace {

// Three updates of w = (0.5, -1, 2) from zero moments with lr 0.01, weight decay 0.1 and the
// default betas and eps; returns (w, m, v).
std::vector<Tensor> three_steps(int64_t decoupled) {
  Attrs attrs;
  attrs.set("weight_decay", 0.1).set("decoupled", decoupled);
  Tensor w = tensor_of({3}, {0.5f, -1.0f, 2.0f}), m({3}), v({3});
  const std::vector<std::vector<float>> grads = {
      {0.1f, -0.2f, 0.3f}, {-0.05f, 0.4f, 0.1f}, {0.2f, 0.0f, -0.3f}};
  for (int t = 1; t <= 3; ++t) {
    std::vector<Tensor> out =
        run_forward("adam_update", attrs,
                    {w, tensor_of({3}, grads[t - 1]), m, v, tensor_of({}, {0.01f}),
                     tensor_of({}, {static_cast<float>(t)})});
    w = out[0];
    m = out[1];
    v = out[2];
  }
  return {w, m, v};
}

void check_values(const Tensor& t, const std::vector<double>& expected) {
  REQUIRE(t.count() == static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("element " << i);
    CHECK(t.data()[i] == Approx(expected[i]).epsilon(1e-5));
  }
}

}  // namespace

TEST_CASE("adam_update follows torch.optim.Adam over three steps", "[adam_update]") {
  const std::vector<Tensor> out = three_steps(0);
  check_values(out[0], {0.475223551, -0.98950055, 1.97424446});
  check_values(out[1], {0.036893492, -0.00711542954, 0.0572142942});
  check_values(out[2], {8.4126254e-05, 0.000190142242, 0.000349207091});
}

TEST_CASE("adam_update with decoupled decay follows torch.optim.AdamW", "[adam_update]") {
  const std::vector<Tensor> out = three_steps(1);
  check_values(out[0], {0.479279668, -0.993510354, 1.97484019});
  check_values(out[1], {0.0236, 0.0198, 0.0033});
  check_values(out[2], {5.247751e-05, 0.00019976004, 0.00018981009});
}

TEST_CASE("adam_update refuses bad hyper-parameters and a step before the first", "[adam_update]") {
  CHECK_THROWS_WITH(OperatorRegistry::create("adam_update", Attrs().set("beta1", 1.0)),
                    Catch::Contains("beta1 and beta2 must be in [0, 1), got 1 and 0.999"));
  CHECK_THROWS_WITH(OperatorRegistry::create("adam_update", Attrs().set("eps", 0.0)),
                    Catch::Contains("eps must be positive"));
  Tensor w = tensor_of({1}, {1.0f});
  CHECK_THROWS_WITH(
      run_forward("adam_update", {},
                  {w, w, Tensor({1}), Tensor({1}), tensor_of({}, {0.1f}), tensor_of({}, {0.0f})}),
      Catch::Contains("step must be at least 1"));
}

TEST_CASE("adam_update of several weights updates each as alone, bit for bit", "[adam_update]") {
  Rng rng(11);
  const Tensor lr = tensor_of({}, {0.01f}), step = tensor_of({}, {3.0f});
  for (int64_t decoupled : {0, 1}) {
    INFO("decoupled " << decoupled);
    const Attrs attrs = Attrs().set("weight_decay", 0.01).set("decoupled", decoupled);
    std::vector<Tensor> inputs;
    for (const Shape& shape : {Shape{3, 4}, Shape{300, 300}, Shape{0}, Shape{7}}) {
      for (int role = 0; role < 4; ++role) inputs.push_back(random_tensor(shape, rng));
      Tensor& v = inputs.back();  // the second moment is never negative
      for (int64_t i = 0; i < v.count(); ++i) v.mutable_data()[i] *= v.data()[i];
    }
    inputs.push_back(lr);
    inputs.push_back(step);
    const std::vector<Tensor> together = run_forward("adam_update", attrs, inputs);
    REQUIRE(together.size() == 12);
    for (size_t k = 0; k < 4; ++k) {
      INFO("weight " << k);
      const std::vector<Tensor> alone = run_forward(
          "adam_update", attrs,
          {inputs[4 * k], inputs[4 * k + 1], inputs[4 * k + 2], inputs[4 * k + 3], lr, step});
      for (size_t r = 0; r < 3; ++r) CHECK(together[3 * k + r].values() == alone[r].values());
    }
  }
  const Attrs attrs;
  REQUIRE_THROWS_WITH(run_forward("adam_update", attrs, {lr, lr, lr, lr, lr}),
                      Catch::Contains("5 inputs; expected (weight, grad, m, v) for each weight"));
  const Tensor a = tensor_of({2}, {1, 2}), b = tensor_of({1}, {1});
  REQUIRE_THROWS_WITH(run_forward("adam_update", attrs, {a, a, a, a, a, a, b, a, lr, step}),
                      Catch::Contains("input 6 (m of weight 1) has shape [1], expected input 4's"));
}

// Weights of a million floats or more take the streaming-store path (cpu/update_loop.hpp):
// the same floats as the plain loop that smaller weights take, on any thread count.
TEST_CASE("adam_update of a large weight gives the floats of its pieces updated alone",
          "[adam_update]") {
  Rng rng(12);
  const int64_t n = (int64_t{1} << 20) + 13, piece = 65536;
  const Tensor lr = tensor_of({}, {0.01f}), step = tensor_of({}, {3.0f});
  std::vector<Tensor> large;
  for (int role = 0; role < 4; ++role) large.push_back(random_tensor({n}, rng));
  for (int64_t i = 0; i < n; ++i) large[3].mutable_data()[i] *= large[3].data()[i];
  const int saved = omp_get_max_threads();
  for (int64_t decoupled : {0, 1}) {
    const Attrs attrs = Attrs().set("weight_decay", 0.01).set("decoupled", decoupled);
    std::vector<std::vector<float>> expected(3);
    for (int64_t begin = 0; begin < n; begin += piece) {
      std::vector<Tensor> inputs;
      for (const Tensor& t : large) {
        const int64_t count = std::min(piece, n - begin);
        inputs.push_back(
            tensor_of({count}, std::vector<float>(t.data() + begin, t.data() + begin + count)));
      }
      inputs.insert(inputs.end(), {lr, step});
      const std::vector<Tensor> out = run_forward("adam_update", attrs, inputs);
      for (size_t r = 0; r < 3; ++r)
        expected[r].insert(expected[r].end(), out[r].data(), out[r].data() + out[r].count());
    }
    for (int threads : {1, 2, 3}) {
      INFO("decoupled " << decoupled << ", " << threads << " threads");
      set_compute_threads(threads);
      const std::vector<Tensor> out =
          run_forward("adam_update", attrs, {large[0], large[1], large[2], large[3], lr, step});
      for (size_t r = 0; r < 3; ++r) CHECK((out[r].values() == expected[r]));
    }
  }
  set_compute_threads(saved);
}

// The kernel does four elements at a time and the last n % 4 alone; both give the same floats.
TEST_CASE("adam_update gives each element the floats it gets alone", "[adam_update]") {
  Rng rng(13);
  const int64_t n = 1001;
  const Tensor lr = tensor_of({}, {0.01f}), step = tensor_of({}, {2.0f});
  std::vector<Tensor> inputs;
  for (int role = 0; role < 4; ++role) inputs.push_back(random_tensor({n}, rng));
  for (int64_t i = 0; i < n; ++i) inputs[3].mutable_data()[i] *= inputs[3].data()[i];
  const Attrs attrs = Attrs().set("weight_decay", 0.01);
  const std::vector<Tensor> together =
      run_forward("adam_update", attrs, {inputs[0], inputs[1], inputs[2], inputs[3], lr, step});
  for (int64_t i = 0; i < n; ++i) {
    std::vector<Tensor> alone_inputs;
    for (const Tensor& t : inputs) alone_inputs.push_back(tensor_of({1}, {t.data()[i]}));
    alone_inputs.insert(alone_inputs.end(), {lr, step});
    const std::vector<Tensor> alone = run_forward("adam_update", attrs, alone_inputs);
    for (size_t r = 0; r < 3; ++r) {
      INFO("element " << i << ", output " << r);
      REQUIRE(together[r].data()[i] == alone[r].data()[0]);
    }
  }
}

TEST_CASE("adam_update with count_non_finite counts its non-finite new weights", "[adam_update]") {
  Rng rng(12);
  for (const int64_t n : {int64_t{11}, (int64_t{1} << 20) + 13}) {
    INFO(n << " weights");
    Tensor w = random_tensor({n}, rng), g = random_tensor({n}, rng);
    Tensor m = random_tensor({n}, rng), v({n});
    g.mutable_data()[0] = NAN;
    g.mutable_data()[n - 1] = INFINITY;  // an infinite moment: the step is NaN
    const Tensor lr = tensor_of({}, {0.01f}), step = tensor_of({}, {1.0f});
    const std::vector<Tensor> counted =
        run_forward("adam_update", Attrs().set("count_non_finite", 1), {w, g, m, v, lr, step});
    const std::vector<Tensor> alone = run_forward("adam_update", {}, {w, g, m, v, lr, step});
    REQUIRE(counted.size() == 4);
    CHECK(counted[3].data()[0] == 2.0f);
    for (int k = 0; k < 3; ++k)
      CHECK(std::memcmp(counted[k].data(), alone[k].data(), sizeof(float) * n) == 0);
  }
}
