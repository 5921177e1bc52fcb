// The operator registry: every operator of the library declares its signature (purine ops).
#include <catch2/catch.hpp>

#include "operators/registry.hpp"

using namespace purine;

TEST_CASE("every operator of the library declares its inputs, outputs and attributes",
          "[registry]") {
  int listed = 0;
  for (const std::string& type : OperatorRegistry::names()) {
    if (type.rfind("test_", 0) == 0) continue;  // this binary's own test operators
    INFO(type);
    CHECK(OperatorRegistry::signature(type).find("->") != std::string::npos);
    ++listed;
  }
  CHECK(listed >= 45);
  CHECK(OperatorRegistry::signature("sgd_update") ==
        "(weight, grad, history, ..., lr {}) -> (new_weight, new_history, ..., [non_finite {}]); "
        "attrs: momentum (float, 0), weight_decay (float, 0), count_non_finite (int, 0)");
  CHECK_THROWS_WITH(OperatorRegistry::signature("warp"), "unknown operator type 'warp'");
}

TEST_CASE("a bad attribute is refused when the op is made, naming the op type", "[registry]") {
  using Catch::Contains;
  CHECK_THROWS_WITH(OperatorRegistry::create("conv_grad_weight", Attrs().set("stride", 0)),
                    Contains("conv_grad_weight: stride is 0x0, expected 1 or more"));
  CHECK_THROWS_WITH(OperatorRegistry::create("conv", Attrs().set("engine", "cudnn")),
                    Contains("conv: engine is 'cudnn'"));
  CHECK_THROWS_WITH(OperatorRegistry::create("pool_grad", Attrs().set("kernel", 2).set("pad", 2)),
                    Contains("pool_grad: pad is 2x2, expected 0 or more and less than the kernel"));
  CHECK_THROWS_WITH(OperatorRegistry::create("pool", Attrs()),
                    Contains("pool: missing attribute 'kernel'"));
  CHECK_THROWS_WITH(OperatorRegistry::create("lrn_grad", Attrs().set("size", 4)),
                    Contains("lrn_grad: size is 4, expected an odd number"));
  CHECK_THROWS_WITH(OperatorRegistry::create("batch_norm_relu_grad", Attrs().set("mode", "eval")),
                    Contains("batch_norm_relu_grad: mode is 'eval', expected 'train' or 'test'"));
  CHECK_THROWS_WITH(OperatorRegistry::create("sync_batch_norm", Attrs().set("mode", "eval")),
                    Contains("sync_batch_norm: mode is 'eval'"));
  CHECK_THROWS_WITH(OperatorRegistry::create("sync_batch_norm", Attrs().set("mode", "test")),
                    Contains("sync_batch_norm: mode 'test' normalizes by the running statistics"));
}
