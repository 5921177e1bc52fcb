// graphs/channel_blocks.hpp: activations whose every op takes channel blocks get them, the rest
// stay plain, and a blocked graph computes the plain graph's loss and gradients bit for bit.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "graphs/channel_blocks.hpp"
#include "graphs/initialize.hpp"
#include "graphs/layers.hpp"
#include "operators/conv.hpp"
#include "purine/autodiff.hpp"
#include "purine/dsl.hpp"
#include "purine/runnable.hpp"
#include "tests/same_bits.hpp"

using namespace purine;
using purine::testing::same_bits;

namespace {

// images [4, 3, 8, 8] -> stem (3x3, 16) -> bn -> relu = a -> conv1 -> bn -> relu -> conv2 ->
// bn -> sum with a -> relu -> 8x8 average pool -> fc -> softmax loss, all at `at`.
struct ResidualNet {
  Graph g;
  Blob* loss = nullptr;
  Gradients grads;
  std::vector<Blob*> wrt;

  explicit ResidualNet(Location at = Location::cpu()) {
    Graph::Placement place(g, at);
    Blob* images = g.add_blob("images", {4, 3, 8, 8});
    Blob* labels = g.add_blob("labels", {4});
    const ConvLayer::Options conv{16, 3, 1, 1, /*bias=*/false};
    Blob* a = (B{images} >> g.add<ConvLayer>("stem", conv) >>
               g.add<BatchNormLayer>("stem_bn", BatchNormLayer::Options{}) >>
               g.add<ActivationLayer>("stem_relu", "relu"))
                  .top(0);
    Blob* branch = (B{a} >> g.add<ConvLayer>("conv1", conv) >>
                    g.add<BatchNormLayer>("bn1", BatchNormLayer::Options{}) >>
                    g.add<ActivationLayer>("relu1", "relu") >> g.add<ConvLayer>("conv2", conv) >>
                    g.add<BatchNormLayer>("bn2", BatchNormLayer::Options{}))
                       .top(0);
    auto& sum = g.add<SumLayer>("sum");
    B{branch, a} >> sum;
    Blob* x = (B{sum.top(0)} >> g.add<ActivationLayer>("out_relu", "relu") >>
               g.add<PoolLayer>("pool", PoolLayer::Options{"avg", 8, 8, 0}) >>
               g.add<InnerProductLayer>("fc", InnerProductLayer::Options{3}))
                  .top(0);
    auto& xent = g.add<SoftmaxLossLayer>("loss");
    B{x, labels} >> xent;
    loss = xent.top(0);
    wrt = {images};
    for (const Parameter& p : g.parameters()) wrt.push_back(p.blob);
    grads = backward(g, loss, wrt);
    if (!at.is_cpu()) return;
    initialize_parameters(g, 5);
    Rng rng(6);
    std::vector<float> pixels(images->shape().count()), classes{0, 2, 1, 2};
    for (float& v : pixels) v = static_cast<float>(rng.uniform(-1, 1));
    images->tensor().set_values(pixels);
    labels->tensor().set_values(classes);
  }

  int block(const std::string& blob) const { return g.blob(blob)->channel_block(); }
};

}  // namespace

TEST_CASE(
    "activations that meet only convolutions, batch norms, ReLUs, sums and pooling get "
    "channel blocks",
    "[channel_blocks]") {
  ResidualNet net;
  const int block = conv_channel_block();
  const int blocked = block_channels(net.g, block);
  // Every activation from the stem's output to the pool's input, forward and backward (the
  // gradients named after the ops that write them; the stem's relu's gradient is the sum of
  // two, written by a sum op).
  std::vector<std::string> blocked_names;
  for (const auto& blob : net.g.blobs())
    if (blob->channel_block() > 0) blocked_names.push_back(blob->name());
  CHECK(blocked_names == std::vector<std::string>{"stem::top",
                                                  "stem_bn::top",
                                                  "stem_relu::top",
                                                  "conv1::top",
                                                  "bn1::top",
                                                  "relu1::top",
                                                  "conv2::top",
                                                  "bn2::top",
                                                  "sum::top",
                                                  "out_relu::top",
                                                  "pool::pool::grad::in0",
                                                  "out_relu::relu::grad::in0",
                                                  "bn2::bn::grad::in0",
                                                  "conv2::conv::grad::in0",
                                                  "relu1::relu::grad::in0",
                                                  "bn1::bn::grad::in0",
                                                  "conv1::conv::grad::in0",
                                                  "stem_relu::top::grad",
                                                  "stem_relu::relu::grad::in0",
                                                  "stem_bn::bn::grad::in0"});
  CHECK(blocked == static_cast<int>(blocked_names.size()));
  // Plain: the pool's output, which the inner product reads as rows (the pooling reads blocks and
  // writes plain), the images (3 channels) and the parameters.
  for (const char* name : {"pool::top", "images", "conv1::weight"}) {
    INFO(name);
    CHECK(net.block(name) == 0);
  }
}

TEST_CASE("a graph in channel blocks computes the plain graph's loss and gradients bit for bit",
          "[channel_blocks][determinism]") {
  ResidualNet blocked, plain;
  REQUIRE(block_channels(blocked.g, conv_channel_block()) > 0);
  Runnable(blocked.g).run();
  Runnable(plain.g).run();
  CHECK(same_bits(blocked.loss->tensor(), plain.loss->tensor()));
  for (size_t i = 0; i < plain.wrt.size(); ++i) {
    INFO(plain.wrt[i]->name());
    const Tensor& grad = plain.grads.of(plain.wrt[i])->tensor();
    CHECK(same_bits(blocked.grads.of(blocked.wrt[i])->tensor(), grad));
    const std::vector<float> values = grad.values();
    CHECK(std::any_of(values.begin(), values.end(), [](float v) { return v != 0; }));
  }
}

TEST_CASE("channel blocks are not given at a GPU, in blocks the kernels do not use, or twice",
          "[channel_blocks]") {
  ResidualNet gpu(Location::gpu(0));
  CHECK(block_channels(gpu.g, conv_channel_block()) == 0);
  ResidualNet other;  // the convolutions take only their kernels' block
  CHECK(block_channels(other.g, 2 * conv_channel_block()) == 0);
  ResidualNet net;
  net.g.blob("conv1::top")->tensor();  // a blob with a tensor keeps its layout
  block_channels(net.g, conv_channel_block());
  CHECK(net.block("conv1::top") == 0);
  CHECK_THROWS_WITH(net.g.blob("conv1::top")->set_channel_block(16),
                    Catch::Contains("already has a tensor"));
}

TEST_CASE("activations between convolutions whose kernels compute plain stay plain",
          "[channel_blocks]") {
  // images -> a -> b -> c, 3x3 kernels padded 1 over planes of `side` x `side`: at 2x2 every
  // output pixel sees every input pixel, a geometry our dense-planes kernel takes in every
  // direction (plain; in blocks it would reorder them through copies); at 8x8 oneDNN's does.
  for (int side : {2, 8}) {
    INFO(side << "x" << side << " planes");
    Graph g;
    Blob* images = g.add_blob("images", {4, 16, side, side});
    const ConvLayer::Options conv{16, 3, 1, 1, /*bias=*/false};
    B{images} >> g.add<ConvLayer>("a", conv) >> g.add<ConvLayer>("b", conv) >>
        g.add<ConvLayer>("c", conv);
    block_channels(g, conv_channel_block());
    const int expected = side == 2 ? 0 : conv_channel_block();
    CHECK(g.blob("a::top")->channel_block() == expected);
    CHECK(g.blob("b::top")->channel_block() == expected);
  }
}
