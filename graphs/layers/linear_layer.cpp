// LinearLayer: the whole build and the two model-parallel ones (graphs/layers.hpp).
#include "base/error.hpp"
#include "graphs/layers.hpp"

namespace purine {

namespace {

// `extent` cut into `parts` near-equal sizes, the larger ones first.
std::vector<int64_t> part_sizes(int64_t extent, size_t parts) {
  const int64_t n = static_cast<int64_t>(parts);
  std::vector<int64_t> sizes;
  for (int64_t k = 0; k < n; ++k) sizes.push_back(extent / n + (k < extent % n ? 1 : 0));
  return sizes;
}

std::string part_scope(size_t k) { return "part" + std::to_string(k); }

}  // namespace

void LinearLayer::build_linear(const std::string& op_type, const Attrs& attrs,
                               const Shape& weight_shape, const std::string& weight_filler,
                               bool bias) {
  const LayerSplit* split = split_rule();
  if (split && split->locations.size() > 1) {
    const int64_t extent = split->axis == SplitAxis::kOutputs  ? weight_shape[0]
                           : split->axis == SplitAxis::kInputs ? bottom_[0]->shape()[1]
                                                               : bottom_[0]->shape()[0];
    const size_t parts = split->locations.size();
    require(extent >= static_cast<int64_t>(parts), "layer '", name(), "': split over ", parts,
            " locations, but it has ", extent,
            split->axis == SplitAxis::kOutputs  ? " outputs"
            : split->axis == SplitAxis::kInputs ? " inputs along axis 1"
                                                : " images in its batch",
            "; split it over at most ", extent);
    switch (split->axis) {
      case SplitAxis::kOutputs:
        build_split_by_outputs(op_type, attrs, weight_shape, weight_filler, bias, split->locations);
        break;
      case SplitAxis::kInputs:
        build_split_by_inputs(op_type, attrs, weight_shape, weight_filler, bias, split->locations);
        break;
      case SplitAxis::kBatch:
        build_split_by_batch(op_type, attrs, weight_shape, weight_filler, bias, split->locations);
        break;
    }
    return;
  }
  Blob* x = bottom_[0];
  Blob* w = make_parameter("weight", weight_shape, weight_filler);
  if (!bias) {
    make_top_op(op_type, op_type, attrs, {x, w});
    return;
  }
  Blob* y = make_op(op_type, op_type, attrs, {x, w})[0];
  Blob* b =
      make_parameter("bias", {weight_shape[0]}, "fill_constant", Attrs().set("value", 0.0), 0.0);
  make_top_op("add_bias", "bias", {}, {y, b});
}

void LinearLayer::build_split_by_outputs(const std::string& op_type, const Attrs& attrs,
                                         const Shape& weight_shape,
                                         const std::string& weight_filler, bool bias,
                                         const std::vector<Location>& locations) {
  const int64_t row = weight_shape.count_from(1);
  const std::vector<int64_t> sizes = part_sizes(weight_shape[0], locations.size());
  Slices slices;
  slices.axis = 1;
  slices.location = graph().current_location();
  slices.thread = graph().current_thread();
  int64_t first = 0;  // the part's first output
  for (size_t k = 0; k < locations.size(); ++k) {
    Graph::Placement at(graph(), locations[k]);
    const int part = static_cast<int>(k);
    std::vector<int64_t> dims = weight_shape.dims();
    dims[0] = sizes[k];
    Blob* w = make_parameter_piece("weight", weight_shape, part, Shape(dims), first * row, 0,
                                   weight_filler);
    Blob* b = bias ? make_parameter_piece("bias", {weight_shape[0]}, part, {sizes[k]}, first, 0,
                                          "fill_constant", Attrs().set("value", 0.0), 0.0)
                   : nullptr;
    Graph::Scope scope(graph(), part_scope(k));
    Blob* y = make_op(op_type, op_type, attrs, {bottom_[0], w})[0];
    if (b) y = make_op("add_bias", "bias", {}, {y, b})[0];
    slices.blobs.push_back(y);
    first += sizes[k];
  }
  std::vector<int64_t> joined = slices.blobs[0]->shape().dims();
  joined[1] = weight_shape[0];
  graph().join_later(top_or_new(0, "top", Shape(joined)), std::move(slices));
}

void LinearLayer::build_split_by_inputs(const std::string& op_type, const Attrs& attrs,
                                        const Shape& weight_shape, const std::string& weight_filler,
                                        bool bias, const std::vector<Location>& locations) {
  Blob* x = bottom_[0];
  const int64_t channels = x->shape()[1];
  const int64_t row = weight_shape.count_from(1);
  const int64_t per_channel = row / channels;  // weight columns per input channel or feature
  const std::vector<int64_t> sizes = part_sizes(channels, locations.size());
  const std::vector<Blob*> inputs = input_slices(1, sizes, locations);
  std::vector<Blob*> partial;
  int64_t first = 0;  // the part's first input channel
  for (size_t k = 0; k < locations.size(); ++k) {
    Graph::Placement at(graph(), locations[k]);
    std::vector<int64_t> dims = weight_shape.dims();
    dims[1] = dims[1] / channels * sizes[k];
    Blob* w = make_parameter_piece("weight", weight_shape, static_cast<int>(k), Shape(dims),
                                   first * per_channel, row, weight_filler);
    Graph::Scope scope(graph(), part_scope(k));
    partial.push_back(make_op(op_type, op_type, attrs, {inputs[k], w})[0]);
    first += sizes[k];
  }
  if (!bias) {
    make_top_op("sum", "sum", {}, partial);
    return;
  }
  Blob* y = make_op("sum", "sum", {}, partial)[0];
  Blob* b =
      make_parameter("bias", {weight_shape[0]}, "fill_constant", Attrs().set("value", 0.0), 0.0);
  make_top_op("add_bias", "bias", {}, {y, b});
}

std::vector<Blob*> LinearLayer::input_slices(int64_t axis, const std::vector<int64_t>& sizes,
                                             const std::vector<Location>& locations) {
  Blob* x = bottom_[0];
  if (const Slices* slices = graph().slices_of(x);
      slices && slices->axis == axis && slices->blobs.size() == locations.size()) {
    bool match = true;
    for (size_t k = 0; k < locations.size(); ++k)
      match &= slices->blobs[k]->location() == locations[k] &&
               slices->blobs[k]->shape()[axis] == sizes[k];
    if (match) return slices->blobs;
  }
  return make_op(axis == 0 ? "split_batch" : "split_input", "split",
                 Attrs().set("axis", axis).set("sizes", sizes), {x});
}

void LinearLayer::build_split_by_batch(const std::string& op_type, const Attrs& attrs,
                                       const Shape& weight_shape, const std::string& weight_filler,
                                       bool bias, const std::vector<Location>& locations) {
  const std::vector<int64_t> sizes = part_sizes(bottom_[0]->shape()[0], locations.size());
  const std::vector<Blob*> inputs = input_slices(0, sizes, locations);
  Blob* w = make_parameter("weight", weight_shape, weight_filler);
  Blob* b = bias ? make_parameter("bias", {weight_shape[0]}, "fill_constant",
                                  Attrs().set("value", 0.0), 0.0)
                 : nullptr;
  Slices slices;
  slices.axis = 0;
  slices.location = graph().current_location();
  slices.thread = graph().current_thread();
  for (size_t k = 0; k < locations.size(); ++k) {
    Graph::Placement at(graph(), locations[k]);
    Graph::Scope scope(graph(), part_scope(k));
    Blob* y = make_op(op_type, op_type, attrs, {inputs[k], w})[0];
    if (b) y = make_op("add_bias", "bias", {}, {y, b})[0];
    slices.blobs.push_back(y);
  }
  std::vector<int64_t> joined = slices.blobs[0]->shape().dims();
  joined[0] = bottom_[0]->shape()[0];
  graph().join_later(top_or_new(0, "top", Shape(joined)), std::move(slices));
}

}  // namespace purine
