#include "base/error.hpp"
#include "operators/registry.hpp"
#include "purine/graph.hpp"

namespace purine {

Composite::Composite(Graph& graph, const std::string& local_name)
    : graph_(graph),
      local_name_(local_name),
      full_name_(graph.full_name(local_name)),
      prefix_(graph.scope_prefix()),
      location_(graph.current_location()),
      thread_(graph.current_thread()),
      nested_(graph.setups_running_ > 0) {
  if (const Location* placed = graph.placement_of(full_name_)) location_ = *placed;
  if (const LayerSplit* split = graph.split_of(full_name_)) split_ = *split;
}

const std::vector<Blob*>& Composite::top() {
  ensure_setup();
  return top_;
}

void Composite::set_bottom(const std::vector<Blob*>& bottom) {
  require(!setup_done_, "composite '", full_name_, "': bottom set after it was built");
  bottom_ = bottom;
}

void Composite::set_top(const std::vector<Blob*>& top) {
  require(!setup_done_, "composite '", full_name_,
          "': top set after it was built; give the top before its output is used");
  top_ = top;
}

void Composite::ensure_setup() {
  if (setup_done_) return;
  require(!in_setup_, "composite '", full_name_, "' uses its own top while building it");
  in_setup_ = true;
  ++graph_.setups_running_;
  // Re-enter the scope, location and thread the composite was created in.
  std::string saved_prefix = graph_.prefix_;
  graph_.prefix_ = prefix_;
  {
    Graph::Scope scope(graph_, local_name_);
    Graph::Placement placement(graph_, location_, thread_);
    try {
      setup();
    } catch (...) {
      graph_.prefix_ = saved_prefix;
      --graph_.setups_running_;
      in_setup_ = false;
      throw;
    }
  }
  graph_.prefix_ = saved_prefix;
  --graph_.setups_running_;
  in_setup_ = false;
  setup_done_ = true;
}

std::vector<Blob*> Composite::make_top_op(const std::string& local_name, const std::string& type,
                                          const Attrs& attrs, const std::vector<Blob*>& inputs) {
  std::vector<Shape> shapes = infer_shapes(type, attrs, inputs);
  std::vector<Blob*> outputs;
  for (size_t i = 0; i < shapes.size(); ++i)
    outputs.push_back(top_or_new(i, i == 0 ? "top" : "top" + std::to_string(i), shapes[i]));
  return make_op(local_name, type, attrs, inputs, outputs);
}

bool Composite::make_top_op_on_slices(const std::string& type, const Attrs& attrs) {
  const Slices* slices = bottom_.size() == 1 ? graph_.slices_of(bottom_[0]) : nullptr;
  if (!slices || slices->axis > 1) return false;
  Slices tops = *slices;
  tops.location = graph_.current_location();
  tops.thread = graph_.current_thread();
  int64_t extent = 0;  // of the joined top along the axis
  for (size_t k = 0; k < tops.blobs.size(); ++k) {
    Graph::Scope part(graph_, "part" + std::to_string(k));
    Graph::Placement at(graph_, tops.blobs[k]->location());
    tops.blobs[k] = make_op(type, type, attrs, {tops.blobs[k]})[0];
    extent += tops.blobs[k]->shape()[tops.axis];
  }
  std::vector<int64_t> dims = tops.blobs[0]->shape().dims();
  dims[tops.axis] = extent;
  graph_.join_later(top_or_new(0, "top", Shape(dims)), std::move(tops));
  return true;
}

void Composite::require_bottoms(size_t count) const {
  require(bottom_.size() == count, "composite '", full_name_, "': expected ", count, " bottom blob",
          count == 1 ? "" : "s", ", got ", bottom_.size(),
          bottom_.empty() ? " (connect inputs with B{...} >> composite)" : "");
}

Blob* Composite::make_blob(const std::string& local_name, Shape shape) {
  return graph_.add_blob(local_name, std::move(shape));
}

Blob* Composite::make_parameter(const std::string& local_name, Shape shape,
                                const std::string& filler, Attrs filler_attrs, double decay_mult) {
  std::string name;
  if (Blob* shared = graph_.shared_parameter(graph_.full_name(local_name), shape, &name))
    return shared;
  Graph::Scope root(graph_, "", true);
  Blob* b = graph_.add_blob(name, shape);
  filler_attrs.set("shape", shape.dims());
  graph_.add_parameter({b, filler, std::move(filler_attrs), decay_mult});
  return b;
}

Blob* Composite::make_parameter_piece(const std::string& local_name, const Shape& whole_shape,
                                      int part, Shape shape, int64_t offset, int64_t row_stride,
                                      const std::string& filler, Attrs filler_attrs,
                                      double decay_mult) {
  std::string name, whole;
  if (Blob* shared = graph_.shared_parameter(
          graph_.full_name("part" + std::to_string(part) + "::" + local_name), shape, &name))
    return shared;
  graph_.shared_parameter(graph_.full_name(local_name), whole_shape, &whole);
  Graph::Scope root(graph_, "", true);
  Blob* b = graph_.add_blob(name, shape);
  filler_attrs.set("shape", shape.dims());
  Parameter p{b, filler, std::move(filler_attrs), decay_mult};
  p.whole = whole;
  p.whole_shape = whole_shape;
  p.offset = offset;
  p.row_stride = row_stride;
  graph_.add_parameter(std::move(p));
  return b;
}

Blob* Composite::make_state(const std::string& local_name, Shape shape, double value) {
  std::string name;
  if (Blob* shared = graph_.shared_state(graph_.full_name(local_name), shape, &name)) return shared;
  Graph::Scope root(graph_, "", true);
  Blob* b = graph_.add_blob(name, shape);
  Attrs attrs;
  attrs.set("shape", shape.dims()).set("value", value);
  graph_.add_state({b, "fill_constant", std::move(attrs), 0.0});
  return b;
}

std::vector<Blob*> Composite::make_op(const std::string& local_name, const std::string& type,
                                      const Attrs& attrs, const std::vector<Blob*>& inputs,
                                      const std::vector<Blob*>& outputs) {
  if (outputs.empty()) return graph_.apply(local_name, type, attrs, inputs);
  Op* op = graph_.add_op(local_name, type, attrs);
  graph_.set_inputs(op, inputs);
  graph_.set_outputs(op, outputs);
  return outputs;
}

std::vector<Shape> Composite::infer_shapes(const std::string& type, const Attrs& attrs,
                                           const std::vector<Blob*>& inputs) const {
  std::vector<Shape> shapes;
  for (const Blob* b : inputs) shapes.push_back(b->shape());
  try {
    return OperatorRegistry::create(type, attrs)->infer_shapes(shapes);
  } catch (const Error& e) {
    throw Error(str("composite '", full_name_, "': ", e.what()));
  }
}

Blob* Composite::top_or_new(size_t i, const std::string& local_name, const Shape& shape) {
  if (i < top_.size()) {
    require(top_[i]->shape() == shape, "composite '", full_name_, "': top ", i, " (blob '",
            top_[i]->name(), "') has shape ", top_[i]->shape(), ", expected ", shape);
    return top_[i];
  }
  Blob* b = graph_.add_blob(local_name, shape);
  top_.push_back(b);
  return b;
}

}  // namespace purine
