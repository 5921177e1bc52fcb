// convnet: the TensorFlow tutorial network. conv 5x5x32 + ReLU + max pool 2, conv 5x5x64 +
// ReLU + max pool 2, fc 1024 + ReLU, fc 10; "same" padding keeps 28x28 -> 14x14 -> 7x7.
// convnet_bn: the same with batch normalization after each convolution, before its ReLU. Its
// batch statistics train it faster: it is `purine train`'s default, since after 5 epochs on
// Fashion-MNIST it tests about 1% higher than convnet (docs/MEASUREMENTS.md). Data parallel, its
// batch norm is synchronized by default (DataParallelOptions::sync_batch_norm): N replicas at batch
// b follow one at batch N*b to float rounding; without it each replica normalizes by its own batch.
// Its convolutions have no bias: batch norm subtracts each channel's mean, a bias with it, and its
// beta is the channel's offset (the biases took 0.83 of 22 ms per step on the CPU).
#include <string>

#include "graphs/layers.hpp"
#include "models/models.hpp"
#include "purine/dsl.hpp"

namespace purine {
namespace {

// conv<i> (5x5, "same") + [bn<i> +] relu<i> + pool<i> (max 2).
Blob* conv_block(Graph& g, Blob* x, int i, int channels, bool batch_norm, const ModelSpec& spec) {
  const std::string n = std::to_string(i);
  ConvLayer::Options conv{channels, 5, 1, 2};
  conv.bias = !batch_norm;
  Composite* block = &(B{x} >> g.add<ConvLayer>("conv" + n, conv));
  if (batch_norm)
    block = &(*block >>
              g.add<BatchNormLayer>("bn" + n, BatchNormLayer::Options{1e-5, 0.9, spec.training}));
  return (*block >> g.add<ActivationLayer>("relu" + n, "relu") >>
          g.add<PoolLayer>("pool" + n, PoolLayer::Options{"max", 2}))
      .top(0);
}

Blob* convnet_of(Graph& g, Blob* images, const ModelSpec& spec, bool batch_norm) {
  Graph::Scope scope(g, batch_norm ? "convnet_bn" : "convnet");
  Blob* x = conv_block(g, images, 1, 32, batch_norm, spec);
  x = conv_block(g, x, 2, 64, batch_norm, spec);
  return (B{x} >> g.add<InnerProductLayer>("fc1", InnerProductLayer::Options{1024}) >>
          g.add<ActivationLayer>("relu3", "relu") >>
          g.add<InnerProductLayer>("fc2", InnerProductLayer::Options{spec.classes}))
      .top(0);
}

Blob* convnet(Graph& g, Blob* images, const ModelSpec& spec) {
  return convnet_of(g, images, spec, false);
}

Blob* convnet_bn(Graph& g, Blob* images, const ModelSpec& spec) {
  return convnet_of(g, images, spec, true);
}

}  // namespace
PURINE_REGISTER_MODEL("convnet", convnet);
PURINE_REGISTER_MODEL("convnet_bn", convnet_bn);
}  // namespace purine
