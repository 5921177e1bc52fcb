// The ops of gradient clipping by global norm (operators/clip.hpp).
#include <catch2/catch.hpp>
#include <cmath>

#include "operators/registry.hpp"
#include "tests/operators/gradient_test.hpp"

using namespace purine;
using namespace purine::testing;

TEST_CASE("sum_squares, clip_scale and scale_by compute clip_grad_norm_'s factor", "[clip]") {
  const Tensor a = tensor_of({2, 2}, {3.0f, 0.0f, 0.0f, 4.0f});  // squares 25
  const Tensor b = tensor_of({1}, {12.0f});                      // 144: norm sqrt(169) = 13
  const Tensor sa = run_forward("sum_squares", {}, {a})[0];
  const Tensor sb = run_forward("sum_squares", {}, {b})[0];
  CHECK(*sa.data() == 25.0f);
  CHECK(*sb.data() == 144.0f);
  const Tensor c = run_forward("clip_scale", Attrs().set("max_norm", 6.5), {sa, sb})[0];
  CHECK(*c.data() == Approx(6.5 / (13 + 1e-6)));
  const Tensor none = run_forward("clip_scale", Attrs().set("max_norm", 100.0), {sa, sb})[0];
  CHECK(*none.data() == 1.0f);  // the norm is below: no scaling at all
  const Tensor y = run_forward("scale_by", {}, {a, c})[0];
  CHECK(y.data()[0] == Approx(1.5).epsilon(1e-6));
  CHECK(y.data()[3] == Approx(2.0).epsilon(1e-6));
  CHECK_THROWS_WITH(OperatorRegistry::create("clip_scale", Attrs().set("max_norm", 0.0)),
                    Catch::Contains("max_norm must be positive"));
}
