#include "base/error.hpp"
#include "graphs/layers.hpp"

namespace purine {

InnerProductLayer::InnerProductLayer(Graph& graph, const std::string& name, Options options)
    : Composite(graph, name), options_(std::move(options)) {
  require(options_.outputs > 0, "inner product layer '", this->name(),
          "': outputs must be positive, got ", options_.outputs);
}

void InnerProductLayer::setup() {
  require_bottoms(1);
  Blob* x = bottom_[0];
  require(x->shape().ndim() >= 2, "inner product layer '", name(), "': input '", x->name(),
          "' has shape ", x->shape(), "; expected [N, ...] with at least 2 dimensions");
  const int64_t inputs = x->shape().count_from(1);
  Blob* w = make_parameter("weight", {options_.outputs, inputs}, options_.weight_filler);
  if (!options_.bias) {
    make_top_op("ip", "inner_product", {}, {x, w});
    return;
  }
  Blob* y = make_op("ip", "inner_product", {}, {x, w})[0];
  Blob* b =
      make_parameter("bias", {options_.outputs}, "fill_constant", Attrs().set("value", 0.0), 0.0);
  make_top_op("add_bias", "bias", {}, {y, b});
}

}  // namespace purine
