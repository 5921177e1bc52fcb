// alexnet: AlexNet in the single-tower form of Krizhevsky's "One weird trick" (2014), which
// torchvision also uses: convolutions of 64, 192, 384, 256 and 256 maps (11x11 stride 4, 5x5,
// then 3x3), max pooling 3 stride 2 after the first, second and fifth, no LRN; then two fully
// connected layers of 4096 with dropout and the classifier. For 224x224 inputs (the maps go
// 55 -> 27 -> 13 -> 6); its large fully connected head makes it the model of choice for
// comparing data with model parallelism.
#include <string>

#include "graphs/layers.hpp"
#include "models/models.hpp"
#include "purine/dsl.hpp"

namespace purine {
namespace {

Blob* alexnet(Graph& g, Blob* images, const ModelSpec& spec) {
  Graph::Scope scope(g, "alexnet");
  auto conv = [&](int i, int64_t maps, int64_t kernel, int64_t stride, int64_t pad) -> Composite& {
    const std::string n = std::to_string(i);
    return g.add<ConvLayer>("conv" + n, ConvLayer::Options{maps, kernel, stride, pad});
  };
  auto relu = [&](const std::string& name) -> Composite& {
    return g.add<ActivationLayer>(name, "relu");
  };
  auto pool = [&](int i) -> Composite& {
    return g.add<PoolLayer>("pool" + std::to_string(i), PoolLayer::Options{"max", 3, 2});
  };
  Blob* x =
      (B{images} >> conv(1, 64, 11, 4, 2) >> relu("relu1") >> pool(1) >> conv(2, 192, 5, 1, 2) >>
       relu("relu2") >> pool(2) >> conv(3, 384, 3, 1, 1) >> relu("relu3") >>
       conv(4, 256, 3, 1, 1) >> relu("relu4") >> conv(5, 256, 3, 1, 1) >> relu("relu5") >> pool(5))
          .top(0);
  return (B{x} >> g.add<DropoutLayer>("drop6", 0.5, spec.training) >>
          g.add<InnerProductLayer>("fc6", InnerProductLayer::Options{4096}) >> relu("relu6") >>
          g.add<DropoutLayer>("drop7", 0.5, spec.training) >>
          g.add<InnerProductLayer>("fc7", InnerProductLayer::Options{4096}) >> relu("relu7") >>
          g.add<InnerProductLayer>("fc8", InnerProductLayer::Options{spec.classes}))
      .top(0);
}

}  // namespace
PURINE_REGISTER_MODEL("alexnet", alexnet);
}  // namespace purine
