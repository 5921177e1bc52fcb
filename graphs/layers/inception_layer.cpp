#include "graphs/layers.hpp"
#include "purine/dsl.hpp"

namespace purine {

InceptionLayer::InceptionLayer(Graph& graph, const std::string& name, Options options)
    : Composite(graph, name), options_(options) {}

void InceptionLayer::setup() {
  require_bottoms(1);
  Graph& g = graph();
  auto conv_relu = [&](const std::string& name, Blob* in, int64_t outputs, int64_t kernel) {
    auto& conv = g.add<ConvLayer>(name, ConvLayer::Options{outputs, kernel, 1, kernel / 2});
    auto& relu = g.add<ActivationLayer>(name + "_relu", "relu");
    return (B{in} >> conv >> relu).top(0);
  };
  Blob* x = bottom_[0];
  Blob* b1 = conv_relu("1x1", x, options_.conv1x1, 1);
  Blob* b2 =
      conv_relu("3x3", conv_relu("3x3_reduce", x, options_.reduce3x3, 1), options_.conv3x3, 3);
  Blob* b3 =
      conv_relu("5x5", conv_relu("5x5_reduce", x, options_.reduce5x5, 1), options_.conv5x5, 5);
  auto& pool = g.add<PoolLayer>("pool", PoolLayer::Options{"max", 3, 1, 1});
  Blob* b4 = conv_relu("pool_proj", (B{x} >> pool).top(0), options_.pool_proj, 1);
  auto& concat = g.add<ConcatLayer>("concat", 1);
  if (!top_.empty()) concat.set_top(top_);
  top_ = (B{b1, b2, b3, b4} >> concat).top();
}

}  // namespace purine
