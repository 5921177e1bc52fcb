// AlexNet (models/alexnet.cpp), single-tower form: its parameter count is torchvision's
// alexnet's, 61,100,840, computed here layer by layer, and the maps shrink 55 -> 27 -> 13 -> 6.
#include <catch2/catch.hpp>

#include "models/models.hpp"

using namespace purine;

TEST_CASE("alexnet has the architecture's parameters and maps", "[models]") {
  Graph g("net");
  ModelSpec spec;
  spec.classes = 1000;
  Blob* logits = find_model("alexnet")(g, g.add_blob("images", {2, 3, 224, 224}), spec);
  CHECK(logits->shape() == Shape{2, 1000});
  auto conv = [](int64_t in, int64_t out, int64_t k) { return out * in * k * k + out; };
  auto fc = [](int64_t in, int64_t out) { return out * in + out; };
  const int64_t expected = conv(3, 64, 11) + conv(64, 192, 5) + conv(192, 384, 3) +
                           conv(384, 256, 3) + conv(256, 256, 3) + fc(256 * 6 * 6, 4096) +
                           fc(4096, 4096) + fc(4096, 1000);
  CHECK(expected == 61100840);
  int64_t total = 0;
  for (const Parameter& p : g.parameters()) total += p.blob->shape().count();
  CHECK(total == expected);
  CHECK(g.blob("alexnet::conv1::top")->shape() == Shape{2, 64, 55, 55});
  CHECK(g.blob("alexnet::pool1::top")->shape() == Shape{2, 64, 27, 27});
  CHECK(g.blob("alexnet::pool2::top")->shape() == Shape{2, 192, 13, 13});
  CHECK(g.blob("alexnet::pool5::top")->shape() == Shape{2, 256, 6, 6});
  // The fully connected head holds 95% of the weights (why model parallelism splits it).
  CHECK(fc(9216, 4096) + fc(4096, 4096) + fc(4096, 1000) > 0.95 * expected);
}
