// mlp: 784-256-128-10 with ReLU.
#include "graphs/layers.hpp"
#include "models/models.hpp"
#include "purine/dsl.hpp"

namespace purine {
namespace {

Blob* mlp(Graph& g, Blob* images, const ModelSpec& spec) {
  Graph::Scope scope(g, "mlp");
  return (B{images} >> g.add<InnerProductLayer>("fc1", InnerProductLayer::Options{256}) >>
          g.add<ActivationLayer>("relu1", "relu") >>
          g.add<InnerProductLayer>("fc2", InnerProductLayer::Options{128}) >>
          g.add<ActivationLayer>("relu2", "relu") >>
          g.add<InnerProductLayer>("fc3", InnerProductLayer::Options{spec.classes}))
      .top(0);
}

}  // namespace
PURINE_REGISTER_MODEL("mlp", mlp);
}  // namespace purine
