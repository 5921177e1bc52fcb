#include "base/error.hpp"
#include "graphs/layers.hpp"

namespace purine {

ConvLayer::ConvLayer(Graph& graph, const std::string& name, Options options)
    : LinearLayer(graph, name), options_(std::move(options)) {
  require(options_.outputs > 0 && options_.kernel > 0 && options_.stride > 0 && options_.pad >= 0,
          "conv layer '", this->name(), "': outputs, kernel and stride must be positive and pad ",
          "non-negative; got outputs=", options_.outputs, " kernel=", options_.kernel,
          " stride=", options_.stride, " pad=", options_.pad);
}

void ConvLayer::setup() {
  require_bottoms(1);
  Blob* x = bottom_[0];
  require(x->shape().ndim() == 4, "conv layer '", name(), "': input '", x->name(), "' has shape ",
          x->shape(), "; expected [N, C, H, W]");
  const int64_t k = options_.kernel;
  Attrs attrs;
  attrs.set("stride", options_.stride).set("pad", options_.pad);
  build_linear("conv", attrs, {options_.outputs, x->shape()[1], k, k}, options_.weight_filler,
               options_.bias);
}

}  // namespace purine
