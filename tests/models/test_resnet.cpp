// ResNets (models/resnet.cpp): parameter counts follow from the architecture and equal
// torchvision's for resnet18 and resnet50 at 1000 classes; the maps shrink where the paper says;
// each memorizes a fixed batch (short_training.hpp).
#include <catch2/catch.hpp>

#include "models/models.hpp"
#include "tests/models/short_training.hpp"

using namespace purine;
using testing::parameter_count;

namespace {

// A k x k convolution without bias from `in` to `out` maps, and its batch norm's gamma and beta.
int64_t conv_bn(int64_t in, int64_t out, int64_t k) { return out * in * k * k + 2 * out; }

int64_t basic_block(int64_t in, int64_t out) {
  return conv_bn(in, out, 3) + conv_bn(out, out, 3) + (in != out ? conv_bn(in, out, 1) : 0);
}

int64_t bottleneck_block(int64_t in, int64_t width, bool project) {
  return conv_bn(in, width, 1) + conv_bn(width, width, 3) + conv_bn(width, 4 * width, 1) +
         (project ? conv_bn(in, 4 * width, 1) : 0);
}

int64_t resnet18_parameters(int64_t channels, int64_t classes) {
  int64_t total = conv_bn(channels, 64, 7) + 512 * classes + classes;
  int64_t in = 64;
  for (int64_t width : {64, 128, 256, 512}) {
    total += basic_block(in, width) + basic_block(width, width);
    in = width;
  }
  return total;
}

int64_t resnet50_parameters(int64_t channels, int64_t classes) {
  int64_t total = conv_bn(channels, 64, 7) + 2048 * classes + classes;
  int64_t in = 64;
  const int blocks[] = {3, 4, 6, 3};
  const int64_t widths[] = {64, 128, 256, 512};
  for (int s = 0; s < 4; ++s) {
    total += bottleneck_block(in, widths[s], true);  // every stage's first block projects
    for (int b = 1; b < blocks[s]; ++b) total += bottleneck_block(4 * widths[s], widths[s], false);
    in = 4 * widths[s];
  }
  return total;
}

int64_t resnet20_parameters(int64_t channels, int64_t classes) {
  int64_t total = conv_bn(channels, 16, 3) + 64 * classes + classes;
  int64_t in = 16;
  for (int64_t width : {16, 32, 64}) {
    total += basic_block(in, width) + 2 * basic_block(width, width);
    in = width;
  }
  return total;
}

Blob* build(Graph& g, const std::string& model, const Shape& images, int64_t classes) {
  ModelSpec spec;
  spec.classes = classes;
  return find_model(model)(g, g.add_blob("images", images), spec);
}

}  // namespace

TEST_CASE("resnet18 and resnet50 have torchvision's parameters and the paper's maps", "[models]") {
  {
    Graph g("imagenet");
    CHECK(build(g, "resnet18", {2, 3, 224, 224}, 1000)->shape() == Shape{2, 1000});
    CHECK(parameter_count(g) == resnet18_parameters(3, 1000));
    CHECK(resnet18_parameters(3, 1000) == 11689512);  // torchvision.models.resnet18()
    CHECK(g.blob("resnet18::maxpool::top")->shape() == Shape{2, 64, 56, 56});
    CHECK(g.blob("resnet18::layer2_0::relu::top")->shape() == Shape{2, 128, 28, 28});
    CHECK(g.blob("resnet18::layer4_1::relu::top")->shape() == Shape{2, 512, 7, 7});
    CHECK(g.blob("resnet18::avgpool::top")->shape() == Shape{2, 512, 1, 1});
  }
  {
    Graph g("imagenet");
    CHECK(build(g, "resnet50", {2, 3, 224, 224}, 1000)->shape() == Shape{2, 1000});
    CHECK(parameter_count(g) == resnet50_parameters(3, 1000));
    CHECK(resnet50_parameters(3, 1000) == 25557032);  // torchvision.models.resnet50()
    // The stride sits on the 3x3 convolution of a stage's first block.
    CHECK(g.blob("resnet50::layer2_0::conv1_bn::top")->shape() == Shape{2, 128, 56, 56});
    CHECK(g.blob("resnet50::layer2_0::conv2_bn::top")->shape() == Shape{2, 128, 28, 28});
    CHECK(g.blob("resnet50::layer4_2::relu::top")->shape() == Shape{2, 2048, 7, 7});
  }
  Graph g("fashion");
  CHECK(build(g, "resnet18", {4, 1, 28, 28}, 10)->shape() == Shape{4, 10});
  CHECK(parameter_count(g) == resnet18_parameters(1, 10));
  CHECK(g.blob("resnet18::layer4_1::relu::top")->shape() == Shape{4, 512, 1, 1});
}

TEST_CASE("resnet20 is the paper's CIFAR-10 network with projection shortcuts", "[models]") {
  {
    Graph g("cifar");
    CHECK(build(g, "resnet20", {2, 3, 32, 32}, 10)->shape() == Shape{2, 10});
    CHECK(parameter_count(g) == resnet20_parameters(3, 10));
    CHECK(resnet20_parameters(3, 10) == 272474);  // "0.27 M"
    CHECK(g.blob("resnet20::layer3_2::relu::top")->shape() == Shape{2, 64, 8, 8});
  }
  Graph g("fashion");
  CHECK(build(g, "resnet20", {4, 1, 28, 28}, 10)->shape() == Shape{4, 10});
  CHECK(parameter_count(g) == resnet20_parameters(1, 10));
  CHECK(g.blob("resnet20::layer1_2::relu::top")->shape() == Shape{4, 16, 28, 28});
  CHECK(g.blob("resnet20::layer2_0::downsample_bn::top")->shape() == Shape{4, 32, 14, 14});
  CHECK(g.blob("resnet20::layer3_2::relu::top")->shape() == Shape{4, 64, 7, 7});
  // Identity shortcuts where nothing changes: no projection in a stage's later blocks.
  CHECK(g.find_blob("resnet20::layer2_1::downsample::top") == nullptr);
  CHECK(g.find_blob("resnet20::layer2_0::downsample::top") != nullptr);
}

TEST_CASE("resnet20 memorizes a fixed batch", "[models][e2e]") {
  testing::check_memorizes_a_batch("resnet20");
}

TEST_CASE("resnet18 memorizes a fixed batch", "[models][e2e]") {
  testing::check_memorizes_a_batch("resnet18");
}
