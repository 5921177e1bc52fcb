// convnet: the TensorFlow tutorial network. conv 5x5x32 + ReLU + max pool 2, conv 5x5x64 +
// ReLU + max pool 2, fc 1024 + ReLU, fc 10; "same" padding keeps 28x28 -> 14x14 -> 7x7.
#include "graphs/layers.hpp"
#include "models/models.hpp"
#include "purine/dsl.hpp"

namespace purine {
namespace {

Blob* convnet(Graph& g, Blob* images, const ModelSpec& spec) {
  Graph::Scope scope(g, "convnet");
  return (B{images} >> g.add<ConvLayer>("conv1", ConvLayer::Options{32, 5, 1, 2}) >>
          g.add<ActivationLayer>("relu1", "relu") >>
          g.add<PoolLayer>("pool1", PoolLayer::Options{"max", 2}) >>
          g.add<ConvLayer>("conv2", ConvLayer::Options{64, 5, 1, 2}) >>
          g.add<ActivationLayer>("relu2", "relu") >>
          g.add<PoolLayer>("pool2", PoolLayer::Options{"max", 2}) >>
          g.add<InnerProductLayer>("fc1", InnerProductLayer::Options{1024}) >>
          g.add<ActivationLayer>("relu3", "relu") >>
          g.add<InnerProductLayer>("fc2", InnerProductLayer::Options{spec.classes}))
      .top(0);
}

}  // namespace
PURINE_REGISTER_MODEL("convnet", convnet);
}  // namespace purine
