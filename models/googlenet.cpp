// googlenet: inception v1 as in Szegedy et al. 2014 (Table 1), the network of the Purine paper's
// scaling results, without the auxiliary heads: conv 7x7/2 64, max pool 3/2, LRN, conv 1x1 64,
// conv 3x3 192, LRN, max pool 3/2, inception 3a-3b, max pool 3/2, inception 4a-4e, max pool 3/2,
// inception 5a-5b, average pool over the remaining map (7x7 at 224x224 input), dropout 0.4 and
// a fully connected layer to the classes. Convolutions carry a bias and a ReLU. Our pooling
// rounds down, so the 3/2 max pools pad 1 to keep the paper's 112 -> 56 -> 28 -> 14 -> 7 maps.
// About 7.0 M parameters with 1000 classes (tests/models/test_googlenet.cpp counts them).
// googlenet_small: the same inception stacks behind a stem that fits 28x28 images (conv 3x3 64,
// conv 3x3 192, no LRN, one pool to 14x14; then 3a-3b, pool to 7x7, 4a-4e, pool to 4x4, 5a-5b),
// so that it trains on Fashion-MNIST.
#include <string>

#include "graphs/layers.hpp"
#include "models/models.hpp"
#include "purine/dsl.hpp"

namespace purine {
namespace {

Blob* conv_relu(Graph& g, Blob* x, const std::string& name, int64_t outputs, int64_t kernel,
                int64_t stride = 1) {
  return (B{x} >> g.add<ConvLayer>(name, ConvLayer::Options{outputs, kernel, stride, kernel / 2}) >>
          g.add<ActivationLayer>(name + "_relu", "relu"))
      .top(0);
}

Blob* max_pool(Graph& g, Blob* x, const std::string& name) {
  return (B{x} >> g.add<PoolLayer>(name, PoolLayer::Options{"max", 3, 2, 1})).top(0);
}

Blob* inception(Graph& g, Blob* x, const std::string& name, InceptionLayer::Options o) {
  return (B{x} >> g.add<InceptionLayer>(name, o)).top(0);
}

// Inception 3a .. 5b with the pools between them (Table 1's filter counts).
Blob* inception_stacks(Graph& g, Blob* x) {
  x = inception(g, x, "inception_3a", {64, 96, 128, 16, 32, 32});
  x = inception(g, x, "inception_3b", {128, 128, 192, 32, 96, 64});
  x = max_pool(g, x, "pool3");
  x = inception(g, x, "inception_4a", {192, 96, 208, 16, 48, 64});
  x = inception(g, x, "inception_4b", {160, 112, 224, 24, 64, 64});
  x = inception(g, x, "inception_4c", {128, 128, 256, 24, 64, 64});
  x = inception(g, x, "inception_4d", {112, 144, 288, 32, 64, 64});
  x = inception(g, x, "inception_4e", {256, 160, 320, 32, 128, 128});
  x = max_pool(g, x, "pool4");
  x = inception(g, x, "inception_5a", {256, 160, 320, 32, 128, 128});
  return inception(g, x, "inception_5b", {384, 192, 384, 48, 128, 128});
}

// Global average pool, dropout 0.4, the classifier.
Blob* head(Graph& g, Blob* x, const ModelSpec& spec) {
  const int64_t size = x->shape()[2];
  x = (B{x} >> g.add<PoolLayer>("pool5", PoolLayer::Options{"avg", size, 1, 0})).top(0);
  return (B{x} >> g.add<DropoutLayer>("dropout", 0.4, spec.training) >>
          g.add<InnerProductLayer>("classifier", InnerProductLayer::Options{spec.classes}))
      .top(0);
}

Blob* googlenet(Graph& g, Blob* images, const ModelSpec& spec) {
  Graph::Scope scope(g, "googlenet");
  Blob* x = conv_relu(g, images, "conv1", 64, 7, 2);
  x = max_pool(g, x, "pool1");
  x = (B{x} >> g.add<LrnLayer>("norm1", LrnLayer::Options{})).top(0);
  x = conv_relu(g, x, "conv2_reduce", 64, 1);
  x = conv_relu(g, x, "conv2", 192, 3);
  x = (B{x} >> g.add<LrnLayer>("norm2", LrnLayer::Options{})).top(0);
  x = max_pool(g, x, "pool2");
  return head(g, inception_stacks(g, x), spec);
}

Blob* googlenet_small(Graph& g, Blob* images, const ModelSpec& spec) {
  Graph::Scope scope(g, "googlenet_small");
  Blob* x = conv_relu(g, images, "conv1", 64, 3);
  x = conv_relu(g, x, "conv2", 192, 3);
  x = max_pool(g, x, "pool2");
  return head(g, inception_stacks(g, x), spec);
}

}  // namespace
PURINE_REGISTER_MODEL("googlenet", googlenet);
PURINE_REGISTER_MODEL("googlenet_small", googlenet_small);
}  // namespace purine
