// lenet: Caffe's LeNet variant. conv 5x5x20, max pool 2, conv 5x5x50, max pool 2, fc 500 +
// ReLU, fc 10 (no padding: 28 -> 24 -> 12 -> 8 -> 4).
#include "graphs/layers.hpp"
#include "models/models.hpp"
#include "purine/dsl.hpp"

namespace purine {
namespace {

Blob* lenet(Graph& g, Blob* images, const ModelSpec& spec) {
  Graph::Scope scope(g, "lenet");
  return (B{images} >> g.add<ConvLayer>("conv1", ConvLayer::Options{20, 5}) >>
          g.add<PoolLayer>("pool1", PoolLayer::Options{"max", 2}) >>
          g.add<ConvLayer>("conv2", ConvLayer::Options{50, 5}) >>
          g.add<PoolLayer>("pool2", PoolLayer::Options{"max", 2}) >>
          g.add<InnerProductLayer>("fc1", InnerProductLayer::Options{500}) >>
          g.add<ActivationLayer>("relu1", "relu") >>
          g.add<InnerProductLayer>("fc2", InnerProductLayer::Options{spec.classes}))
      .top(0);
}

}  // namespace
PURINE_REGISTER_MODEL("lenet", lenet);
}  // namespace purine
