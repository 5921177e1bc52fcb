// GoogLeNet (models/googlenet.cpp) against the published architecture: the parameter count
// follows from Table 1 of Szegedy et al. 2014 (computed here from the table's filter counts) and
// the maps shrink 224 -> 112 -> 56 -> 28 -> 14 -> 7; googlenet_small fits 28x28 and
// memorizes a fixed batch (short_training.hpp).
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "models/models.hpp"
#include "purine/graph.hpp"
#include "tests/models/short_training.hpp"

using namespace purine;
using testing::parameter_count;

namespace {

// Table 1: (#1x1, #3x3 reduce, #3x3, #5x5 reduce, #5x5, pool proj) of 3a .. 5b.
const std::vector<std::vector<int64_t>> kInceptions = {
    {64, 96, 128, 16, 32, 32},     {128, 128, 192, 32, 96, 64},   {192, 96, 208, 16, 48, 64},
    {160, 112, 224, 24, 64, 64},   {128, 128, 256, 24, 64, 64},   {112, 144, 288, 32, 64, 64},
    {256, 160, 320, 32, 128, 128}, {256, 160, 320, 32, 128, 128}, {384, 192, 384, 48, 128, 128}};

// Weights and biases of the inception stacks, entered with `channels` channels.
int64_t inception_parameters(int64_t channels) {
  int64_t total = 0;
  for (const auto& f : kInceptions) {
    const int64_t a = f[0], br = f[1], b = f[2], cr = f[3], c = f[4], p = f[5];
    total += (channels + 1) * a + (channels + 1) * br + (9 * br + 1) * b + (channels + 1) * cr +
             (25 * cr + 1) * c + (channels + 1) * p;
    channels = a + b + c + p;
  }
  return total;
}

}  // namespace

TEST_CASE("googlenet has the published architecture's parameters and maps", "[models]") {
  Graph g("net");
  Blob* images = g.add_blob("images", {2, 3, 224, 224});
  ModelSpec spec;
  spec.classes = 1000;
  Blob* logits = find_model("googlenet")(g, images, spec);
  CHECK(logits->shape() == Shape{2, 1000});
  const int64_t stem = (7 * 7 * 3 + 1) * 64 + (64 + 1) * 64 + (9 * 64 + 1) * 192;
  const int64_t expected = stem + inception_parameters(192) + (1024 + 1) * 1000;
  CHECK(parameter_count(g) == expected);
  CHECK(expected > 6800000);  // "about 6.8 M" (7.0 M with every bias)
  CHECK(expected < 7100000);
  CHECK(g.blob("googlenet::inception_3a::concat::top")->shape() == Shape{2, 256, 28, 28});
  CHECK(g.blob("googlenet::inception_4e::concat::top")->shape() == Shape{2, 832, 14, 14});
  CHECK(g.blob("googlenet::inception_5b::concat::top")->shape() == Shape{2, 1024, 7, 7});
}

TEST_CASE("googlenet_small fits 28x28 and memorizes a fixed batch", "[models][e2e]") {
  Graph g("net");
  Blob* images = g.add_blob("images", {2, 1, 28, 28});
  Blob* logits = find_model("googlenet_small")(g, images, ModelSpec{});
  CHECK(logits->shape() == Shape{2, 10});
  CHECK(g.blob("googlenet_small::inception_5b::concat::top")->shape() == Shape{2, 1024, 4, 4});
  testing::check_memorizes_a_batch("googlenet_small");
}
