// Residual networks (He, Zhang, Ren and Sun 2016, "Deep Residual Learning for Image
// Recognition"). Every convolution is followed by batch normalization and has no bias of its
// own (the normalization's beta is one); a block adds its input to its last normalized
// convolution and applies a ReLU to the sum. Where a block changes the map size or the channels,
// its shortcut is a strided 1x1 convolution with batch normalization (the paper's option B),
// otherwise the input itself.
//   resnet18, resnet50: the ImageNet networks of the paper's Table 1: conv 7x7/2 64, max pool
//     3/2, four stages of 64, 128, 256 and 512 channels (the last three start with stride 2),
//     global average pooling and a fully connected layer to the classes. resnet18 stacks
//     2, 2, 2, 2 basic blocks (two 3x3 convolutions); resnet50 3, 4, 6, 3 bottleneck blocks
//     (1x1 down to the stage's channels, 3x3, 1x1 up to four times as many), with a stage's stride
//     on the 3x3 convolution as torchvision places it. 11,689,512 and 25,557,032 parameters with
//     1000 classes, as torchvision's (tests/models/test_resnet.cpp). At 224x224 the maps go
//     112 -> 56 -> 28 -> 14 -> 7; at 28x28 they go 14 -> 7 -> 4 -> 2 -> 1.
//   resnet20: the paper's CIFAR-10 network (section 4.2) with n = 3: conv 3x3 16, three stages of
//     three basic blocks with 16, 32 and 64 channels, global average pooling, the classifier;
//     28x28 maps go 28 -> 14 -> 7. About 0.27 M parameters.
#include <string>

#include "graphs/layers.hpp"
#include "models/models.hpp"
#include "purine/dsl.hpp"

namespace purine {
namespace {

// conv `name` (k x k, stride, "same" padding, no bias), batch norm `name`_bn, and with `relu`
// a ReLU `name`_relu.
Blob* conv_bn(Graph& g, Blob* x, const std::string& name, int64_t outputs, int64_t kernel,
              int64_t stride, bool relu, const ModelSpec& spec) {
  ConvLayer::Options conv{outputs, kernel, stride, kernel / 2};
  conv.bias = false;
  Composite* chain =
      &(B{x} >> g.add<ConvLayer>(name, conv) >>
        g.add<BatchNormLayer>(name + "_bn", BatchNormLayer::Options{1e-5, 0.9, spec.training}));
  if (relu) chain = &(*chain >> g.add<ActivationLayer>(name + "_relu", "relu"));
  return chain->top(0);
}

// relu(branch + shortcut), the shortcut projected by `downsample` (1x1, stride) when x's maps or
// channels differ from the branch's.
Blob* join(Graph& g, Blob* x, Blob* branch, int64_t stride, const ModelSpec& spec) {
  Blob* shortcut = x;
  if (stride != 1 || x->shape()[1] != branch->shape()[1])
    shortcut = conv_bn(g, x, "downsample", branch->shape()[1], 1, stride, false, spec);
  return (B{branch, shortcut} >> g.add<SumLayer>("sum") >> g.add<ActivationLayer>("relu", "relu"))
      .top(0);
}

// Two 3x3 convolutions of `channels`, the first with `stride`.
Blob* basic_block(Graph& g, Blob* x, const std::string& name, int64_t channels, int64_t stride,
                  const ModelSpec& spec) {
  Graph::Scope scope(g, name);
  Blob* y = conv_bn(g, x, "conv1", channels, 3, stride, true, spec);
  y = conv_bn(g, y, "conv2", channels, 3, 1, false, spec);
  return join(g, x, y, stride, spec);
}

// 1x1 to `channels`, 3x3 with `stride`, 1x1 to 4 `channels`.
Blob* bottleneck_block(Graph& g, Blob* x, const std::string& name, int64_t channels, int64_t stride,
                       const ModelSpec& spec) {
  Graph::Scope scope(g, name);
  Blob* y = conv_bn(g, x, "conv1", channels, 1, 1, true, spec);
  y = conv_bn(g, y, "conv2", channels, 3, stride, true, spec);
  y = conv_bn(g, y, "conv3", 4 * channels, 1, 1, false, spec);
  return join(g, x, y, stride, spec);
}

using Block = Blob* (*)(Graph&, Blob*, const std::string&, int64_t, int64_t, const ModelSpec&);

struct Stage {
  int blocks;
  int64_t channels, stride;
};

// Stages "layer1", "layer2", ... of blocks "layer<s>_<b>"; a stage's first block has its stride.
Blob* stages(Graph& g, Blob* x, Block block, std::initializer_list<Stage> list,
             const ModelSpec& spec) {
  int s = 1;
  for (const Stage& stage : list) {
    for (int b = 0; b < stage.blocks; ++b) {
      const std::string name = "layer" + std::to_string(s) + "_" + std::to_string(b);
      x = block(g, x, name, stage.channels, b == 0 ? stage.stride : 1, spec);
    }
    ++s;
  }
  return x;
}

// Global average pooling and the classifier.
Blob* head(Graph& g, Blob* x, const ModelSpec& spec) {
  x = (B{x} >> g.add<PoolLayer>("avgpool", PoolLayer::Options{"avg", x->shape()[2], 1, 0})).top(0);
  return (B{x} >> g.add<InnerProductLayer>("fc", InnerProductLayer::Options{spec.classes})).top(0);
}

// conv 7x7/2 64 and max pool 3/2 (padded 1, so that 224 -> 112 -> 56).
Blob* imagenet_stem(Graph& g, Blob* images, const ModelSpec& spec) {
  Blob* x = conv_bn(g, images, "conv1", 64, 7, 2, true, spec);
  return (B{x} >> g.add<PoolLayer>("maxpool", PoolLayer::Options{"max", 3, 2, 1})).top(0);
}

Blob* resnet18(Graph& g, Blob* images, const ModelSpec& spec) {
  Graph::Scope scope(g, "resnet18");
  Blob* x = imagenet_stem(g, images, spec);
  x = stages(g, x, basic_block, {{2, 64, 1}, {2, 128, 2}, {2, 256, 2}, {2, 512, 2}}, spec);
  return head(g, x, spec);
}

Blob* resnet50(Graph& g, Blob* images, const ModelSpec& spec) {
  Graph::Scope scope(g, "resnet50");
  Blob* x = imagenet_stem(g, images, spec);
  x = stages(g, x, bottleneck_block, {{3, 64, 1}, {4, 128, 2}, {6, 256, 2}, {3, 512, 2}}, spec);
  return head(g, x, spec);
}

Blob* resnet20(Graph& g, Blob* images, const ModelSpec& spec) {
  Graph::Scope scope(g, "resnet20");
  Blob* x = conv_bn(g, images, "conv1", 16, 3, 1, true, spec);
  x = stages(g, x, basic_block, {{3, 16, 1}, {3, 32, 2}, {3, 64, 2}}, spec);
  return head(g, x, spec);
}

}  // namespace
PURINE_REGISTER_MODEL("resnet18", resnet18);
PURINE_REGISTER_MODEL("resnet20", resnet20);
PURINE_REGISTER_MODEL("resnet50", resnet50);
}  // namespace purine
