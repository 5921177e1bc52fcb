#include "graphs/copies.hpp"

#include "base/error.hpp"

namespace purine {

namespace {

// `blob` at `to`: the graph's shared copy (or `blob` itself where it already lives), or, when
// the caller gave the top `given`, a copy op of its own writing into it.
Blob* brought_to(Graph& g, const std::string& local_name, Blob* blob, Location to, Blob* given) {
  if (!given) return g.copy_to(blob, to, g.current_thread());
  require(given->location() == to, "copy '", g.full_name(local_name), "': the given top '",
          given->name(), "' is at ", given->location(), ", not at ", to);
  Graph::Placement placement(g, to, g.current_thread());
  Op* op = g.add_op(local_name, "copy");
  g.set_inputs(op, {blob});
  g.set_outputs(op, {given});
  return given;
}

Blob* given_top(const std::vector<Blob*>& top, size_t i) {
  return i < top.size() ? top[i] : nullptr;
}

}  // namespace

Copy::Copy(Graph& graph, const std::string& name, Location to) : Composite(graph, name), to_(to) {}

void Copy::setup() {
  require_bottoms(1);
  top_ = {brought_to(graph(), "copy", bottom_[0], to_, given_top(top_, 0))};
}

Distribute::Distribute(Graph& graph, const std::string& name, std::vector<Location> to)
    : Composite(graph, name), to_(std::move(to)) {
  require(!to_.empty(), "composite '", this->name(), "': no locations to distribute to");
}

void Distribute::setup() {
  require_bottoms(1);
  require(top_.empty() || top_.size() == to_.size(), "composite '", name(), "': ", top_.size(),
          " tops given for ", to_.size(), " locations");
  std::vector<Blob*> tops;
  for (size_t i = 0; i < to_.size(); ++i)
    tops.push_back(
        brought_to(graph(), "copy" + std::to_string(i), bottom_[0], to_[i], given_top(top_, i)));
  top_ = tops;
}

Aggregate::Aggregate(Graph& graph, const std::string& name, Location at, Mode mode)
    : Composite(graph, name), at_(at), mode_(mode) {}

void Aggregate::setup() {
  require(!bottom_.empty(), "composite '", name(),
          "': nothing to aggregate (connect blobs with B{...} >> composite)");
  for (const Blob* b : bottom_)
    require(b->shape() == bottom_[0]->shape(), "composite '", name(), "': blob '", b->name(),
            "' has shape ", b->shape(), " but '", bottom_[0]->name(), "' has ",
            bottom_[0]->shape());
  if (bottom_.size() == 1) {  // the sum and the average of one blob are the blob
    top_ = {brought_to(graph(), "copy", bottom_[0], at_, given_top(top_, 0))};
    return;
  }
  Graph::Placement placement(graph(), at_, graph().current_thread());
  std::vector<Blob*> here;
  for (Blob* b : bottom_) here.push_back(graph().copy_to(b, at_, graph().current_thread()));
  if (mode_ == Mode::kSum) {
    make_top_op("sum", "sum", {}, here);
    return;
  }
  Blob* total = make_op("sum", "sum", {}, here)[0];
  Attrs scale;
  scale.set("alpha", 1.0 / static_cast<double>(here.size()));
  make_top_op("mean", "scale", scale, {total});
}

}  // namespace purine
