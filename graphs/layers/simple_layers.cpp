// Layers that wrap one parameter-free op.
#include "base/error.hpp"
#include "graphs/layers.hpp"

namespace purine {

PoolLayer::PoolLayer(Graph& graph, const std::string& name, Options options)
    : Composite(graph, name), options_(std::move(options)) {
  if (options_.stride == 0) options_.stride = options_.kernel;
  require(options_.mode == "max" || options_.mode == "avg", "pool layer '", this->name(),
          "': mode must be \"max\" or \"avg\", got \"", options_.mode, "\"");
}

void PoolLayer::setup() {
  require_bottoms(1);
  Attrs attrs;
  attrs.set("mode", options_.mode)
      .set("kernel", options_.kernel)
      .set("stride", options_.stride)
      .set("pad", options_.pad);
  if (!make_top_op_on_slices("pool", attrs)) make_top_op("pool", "pool", attrs, bottom_);
}

ActivationLayer::ActivationLayer(Graph& graph, const std::string& name, std::string type)
    : Composite(graph, name), type_(std::move(type)) {
  require(type_ == "relu" || type_ == "sigmoid" || type_ == "tanh", "activation layer '",
          this->name(), "': type must be relu, sigmoid or tanh, got \"", type_, "\"");
}

void ActivationLayer::setup() {
  require_bottoms(1);
  if (!make_top_op_on_slices(type_, {})) make_top_op(type_, type_, {}, bottom_);
}

DropoutLayer::DropoutLayer(Graph& graph, const std::string& name, double ratio, bool training)
    : Composite(graph, name), ratio_(ratio), training_(training) {
  require(ratio_ >= 0 && ratio_ < 1, "dropout layer '", this->name(),
          "': ratio must be in [0, 1), got ", ratio_);
}

void DropoutLayer::setup() {
  require_bottoms(1);
  Attrs attrs;
  attrs.set("ratio", ratio_).set("mode", training_ ? "train" : "test");
  // Outputs (y, mask): only y is a top; the mask is internal.
  Blob* y = top_or_new(0, "top", bottom_[0]->shape());
  Blob* mask = make_blob("mask", bottom_[0]->shape());
  make_op("dropout", "dropout", attrs, bottom_, {y, mask});
}

LrnLayer::LrnLayer(Graph& graph, const std::string& name, Options options)
    : Composite(graph, name), options_(options) {}

void LrnLayer::setup() {
  require_bottoms(1);
  Attrs attrs;
  attrs.set("size", options_.size)
      .set("alpha", options_.alpha)
      .set("beta", options_.beta)
      .set("k", options_.k);
  make_top_op("lrn", "lrn", attrs, bottom_);
}

SoftmaxLossLayer::SoftmaxLossLayer(Graph& graph, const std::string& name)
    : Composite(graph, name) {}

void SoftmaxLossLayer::setup() {
  require_bottoms(2);
  make_top_op("loss", "softmax_cross_entropy", {}, bottom_);
}

FlattenLayer::FlattenLayer(Graph& graph, const std::string& name) : Composite(graph, name) {}

void FlattenLayer::setup() {
  require_bottoms(1);
  const Shape& shape = bottom_[0]->shape();
  require(!shape.dims().empty(), "flatten layer '", name(),
          "': needs a bottom with images along its first axis, got ", shape);
  make_top_op("reshape", "reshape",
              Attrs().set("shape", std::vector<int64_t>{shape[0], shape.count() / shape[0]}),
              bottom_);
}

ConcatLayer::ConcatLayer(Graph& graph, const std::string& name, int64_t axis)
    : Composite(graph, name), axis_(axis) {}

void ConcatLayer::setup() {
  require(!bottom_.empty(), "concat layer '", name(), "': needs at least one bottom blob");
  make_top_op("concat", "concat", Attrs().set("axis", axis_), bottom_);
}

SumLayer::SumLayer(Graph& graph, const std::string& name) : Composite(graph, name) {}

void SumLayer::setup() {
  require(bottom_.size() >= 2, "sum layer '", name(), "': needs at least two bottom blobs, got ",
          bottom_.size());
  for (const Blob* b : bottom_)
    require(b->shape() == bottom_[0]->shape(), "sum layer '", name(), "': bottom '", b->name(),
            "' has shape ", b->shape(), ", bottom '", bottom_[0]->name(), "' ", bottom_[0]->shape(),
            "; a sum needs one shape");
  make_top_op("sum", "sum", {}, bottom_);
}

}  // namespace purine
