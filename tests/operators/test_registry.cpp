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
