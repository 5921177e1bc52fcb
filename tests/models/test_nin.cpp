// NIN (models/nin.cpp): parameter counts and map sizes follow from the architecture (CIFAR-10
// form: about 0.97 M parameters), and it memorizes a fixed batch (short_training.hpp).
#include <catch2/catch.hpp>

#include "models/models.hpp"
#include "tests/models/short_training.hpp"

using namespace purine;
using testing::parameter_count;

namespace {
// Weights and biases of a k x k convolution from `in` to `out` maps.
int64_t conv(int64_t in, int64_t out, int64_t k) { return out * in * k * k + out; }

int64_t nin_parameters(int64_t channels, int64_t classes) {
  return conv(channels, 192, 5) + conv(192, 160, 1) + conv(160, 96, 1) + conv(96, 192, 5) +
         2 * conv(192, 192, 1) + conv(192, 192, 3) + conv(192, 192, 1) + conv(192, classes, 1);
}
}  // namespace

TEST_CASE("nin has the architecture's parameters and maps", "[models]") {
  {
    Graph g("cifar");
    ModelSpec spec;
    Blob* logits = find_model("nin")(g, g.add_blob("images", {2, 3, 32, 32}), spec);
    CHECK(logits->shape() == Shape{2, 10});
    CHECK(parameter_count(g) == nin_parameters(3, 10));
    CHECK(nin_parameters(3, 10) == 966986);  // "about 0.97 M"
    CHECK(g.blob("nin::pool1::top")->shape() == Shape{2, 96, 15, 15});
    CHECK(g.blob("nin::pool2::top")->shape() == Shape{2, 192, 7, 7});
    CHECK(g.blob("nin::global_pool::top")->shape() == Shape{2, 10, 1, 1});
  }
  Graph g("fashion");
  Blob* logits = find_model("nin")(g, g.add_blob("images", {4, 1, 28, 28}), ModelSpec{});
  CHECK(logits->shape() == Shape{4, 10});
  CHECK(parameter_count(g) == nin_parameters(1, 10));
  CHECK(g.blob("nin::cccp1b::top")->shape() == Shape{4, 96, 28, 28});
  CHECK(g.blob("nin::pool2::top")->shape() == Shape{4, 192, 6, 6});
}

TEST_CASE("nin memorizes a fixed batch", "[models][e2e]") {
  testing::check_memorizes_a_batch("nin");
}
