#include "base/error.hpp"
#include "graphs/layers.hpp"

namespace purine {

InnerProductLayer::InnerProductLayer(Graph& graph, const std::string& name, Options options)
    : LinearLayer(graph, name), options_(std::move(options)) {
  require(options_.outputs > 0, "inner product layer '", this->name(),
          "': outputs must be positive, got ", options_.outputs);
}

void InnerProductLayer::setup() {
  require_bottoms(1);
  Blob* x = bottom_[0];
  require(x->shape().ndim() >= 2, "inner product layer '", name(), "': input '", x->name(),
          "' has shape ", x->shape(), "; expected [N, ...] with at least 2 dimensions");
  build_linear("inner_product", {}, {options_.outputs, x->shape().count_from(1)},
               options_.weight_filler, options_.bias);
}

}  // namespace purine
