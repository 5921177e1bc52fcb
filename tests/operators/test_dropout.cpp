#include <omp.h>

#include <catch2/catch.hpp>

#include "operators/counter_rng.hpp"
#include "operators/registry.hpp"
#include "tests/operators/gradient_test.hpp"

using namespace purine;
using namespace purine::testing;

TEST_CASE("dropout keeps about 1 - ratio of the elements, scaled", "[dropout]") {
  Tensor x({100, 100});
  x.fill(3.0f);
  std::vector<Tensor> out = run_forward("dropout", Attrs().set("ratio", 0.25), {x}, 42);
  int64_t kept = 0;
  for (int64_t i = 0; i < x.count(); ++i) {
    const float m = out[1].data()[i];
    REQUIRE((m == 0.0f || m == Approx(4.0f / 3)));
    CHECK(out[0].data()[i] == 3.0f * m);
    kept += m != 0.0f;
  }
  CHECK(kept / 10000.0 == Approx(0.75).margin(0.02));
}

TEST_CASE("dropout repeats bit-identically for a seed", "[dropout]") {
  Rng rng(1);
  Tensor x = random_tensor({7, 9}, rng);
  std::vector<Tensor> a = run_forward("dropout", {}, {x}, 5);
  std::vector<Tensor> b = run_forward("dropout", {}, {x}, 5);
  std::vector<Tensor> c = run_forward("dropout", {}, {x}, 6);
  bool differs = false;
  for (int64_t i = 0; i < x.count(); ++i) {
    CHECK(a[0].data()[i] == b[0].data()[i]);
    CHECK(a[1].data()[i] == b[1].data()[i]);
    differs |= a[1].data()[i] != c[1].data()[i];
  }
  CHECK(differs);
  // Masks come from the counter-based stream keyed by two draws of the generator, the stream the
  // GPU kernel draws from (so both give the same masks).
  Rng draws(5);
  const uint64_t key = draw_key(draws);
  for (int64_t i = 0; i < x.count(); ++i)
    CHECK((a[1].data()[i] != 0.0f) == (counter_uniform01(key, static_cast<uint64_t>(i)) >= 0.5f));
}

TEST_CASE("dropout's masks do not depend on the thread count", "[dropout]") {
  Rng rng(3);
  Tensor x = random_tensor({300, 301}, rng);  // above the threading threshold, uneven blocks
  const int saved = omp_get_max_threads();
  std::vector<std::vector<Tensor>> runs;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    runs.push_back(run_forward("dropout", Attrs().set("ratio", 0.3), {x}, 9));
  }
  omp_set_num_threads(saved);
  for (size_t r = 1; r < runs.size(); ++r) {
    CHECK(runs[r][0].values() == runs[0][0].values());
    CHECK(runs[r][1].values() == runs[0][1].values());
  }
}

TEST_CASE("dropout in test mode passes x through without random numbers", "[dropout]") {
  Rng rng(2);
  Tensor x = random_tensor({3, 4}, rng);
  auto op = OperatorRegistry::create("dropout", Attrs().set("mode", "test"));
  CHECK_FALSE(op->uses_rng());
  Tensor y({3, 4}), mask({3, 4});
  OpContext no_rng;
  op->compute({&x}, {&y, &mask}, no_rng);
  for (int64_t i = 0; i < x.count(); ++i) {
    CHECK(y.data()[i] == x.data()[i]);
    CHECK(mask.data()[i] == 1.0f);
  }
}

TEST_CASE("dropout_grad multiplies by the mask", "[dropout]") {
  Tensor mask = tensor_of({3}, {0.0f, 2.0f, 2.0f});
  Tensor dy = tensor_of({3}, {5.0f, 1.5f, -1.0f});
  Tensor dx = run_forward("dropout_grad", {}, {mask, dy})[0];
  CHECK(dx.data()[0] == 0.0f);
  CHECK(dx.data()[1] == 3.0f);
  CHECK(dx.data()[2] == -2.0f);
}

TEST_CASE("dropout gradient passes the numeric check", "[dropout]") {
  Rng rng(14);
  GradientCheckOptions options;
  options.loss_outputs = {0};
  check_gradient("dropout", Attrs().set("ratio", 0.3), {random_tensor({4, 6}, rng)}, options);
}

TEST_CASE("dropout rejects bad attributes and shapes", "[dropout]") {
  REQUIRE_THROWS_WITH(OperatorRegistry::create("dropout", Attrs().set("ratio", 1.0)),
                      Catch::Contains("'ratio' is 1"));
  REQUIRE_THROWS_WITH(OperatorRegistry::create("dropout", Attrs().set("mode", "eval")),
                      Catch::Contains("'mode' is 'eval'"));
  REQUIRE_THROWS_WITH(run_forward("dropout_grad", {}, {Tensor({2, 3}), Tensor({2, 2})}),
                      Catch::Contains("input 1 (dy) has shape [2,2]"));
}
