// nin: Network in Network (Lin, Chen and Yan 2013), the network purine2 shipped, in its CIFAR-10
// form: three mlpconv blocks, each a spatial convolution followed by two 1x1 convolutions (the
// "micro networks"), every one with ReLU; max pooling and dropout after the first block,
// average pooling and dropout after the second; the last 1x1 convolution has one map per class
// and global average pooling turns each map into a logit, so there is no fully connected layer.
// Padding keeps the maps: 28x28 -> 13x13 -> 6x6 on Fashion-MNIST (32 -> 15 -> 7 on CIFAR-10).
#include <string>
#include <vector>

#include "graphs/layers.hpp"
#include "models/models.hpp"
#include "purine/dsl.hpp"

namespace purine {
namespace {

// conv<i> (k x k) then cccp<i>a, cccp<i>b (1x1), each with ReLU.
Blob* mlpconv(Graph& g, Blob* x, int i, int64_t kernel, const std::vector<int64_t>& maps) {
  const std::string n = std::to_string(i);
  Composite* block =
      &(B{x} >> g.add<ConvLayer>("conv" + n, ConvLayer::Options{maps[0], kernel, 1, kernel / 2}) >>
        g.add<ActivationLayer>("relu" + n, "relu"));
  for (int k = 1; k <= 2; ++k) {
    const std::string c = n + (k == 1 ? "a" : "b");
    block = &(*block >> g.add<ConvLayer>("cccp" + c, ConvLayer::Options{maps[k], 1}) >>
              g.add<ActivationLayer>("relu" + c, "relu"));
  }
  return block->top(0);
}

Blob* nin(Graph& g, Blob* images, const ModelSpec& spec) {
  Graph::Scope scope(g, "nin");
  Blob* x = mlpconv(g, images, 1, 5, {192, 160, 96});
  x = (B{x} >> g.add<PoolLayer>("pool1", PoolLayer::Options{"max", 3, 2}) >>
       g.add<DropoutLayer>("drop1", 0.5, spec.training))
          .top(0);
  x = mlpconv(g, x, 2, 5, {192, 192, 192});
  x = (B{x} >> g.add<PoolLayer>("pool2", PoolLayer::Options{"avg", 3, 2}) >>
       g.add<DropoutLayer>("drop2", 0.5, spec.training))
          .top(0);
  x = mlpconv(g, x, 3, 3, {192, 192, spec.classes});
  const Shape& maps = x->shape();  // [N, classes, h, w]
  return (B{x} >> g.add<PoolLayer>("global_pool", PoolLayer::Options{"avg", maps[2], 1}) >>
          g.add<FlattenLayer>("logits"))
      .top(0);
}

}  // namespace
PURINE_REGISTER_MODEL("nin", nin);
}  // namespace purine
