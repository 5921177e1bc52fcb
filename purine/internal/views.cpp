#include "purine/internal/views.hpp"

namespace purine {

namespace {

bool slices_are_contiguous(const Shape& shape, int64_t axis) {
  return axis >= 0 && shape.count_to(static_cast<int>(axis)) == 1;
}

Aliasing::Kind aliasing_of(const Op& op) { return op.kernel().traits().aliasing.kind; }

int64_t normalized_axis(const Op& op, const Shape& shape) {
  const int64_t axis = op.kernel().traits().aliasing.axis;
  return axis < 0 ? axis + shape.ndim() : axis;
}

}  // namespace

std::set<const Op*> alias_views(Graph& graph, int rank) {
  return alias_views(graph, rank, graph.topological_order());
}

std::set<const Op*> alias_views(Graph& graph, int rank, const std::vector<Op*>& order) {
  std::set<const Blob*> pinned;   // blobs that must keep memory of their own
  std::set<const Blob*> swapped;  // may still be views, but only of a whole storage
  for (auto& [a, b] : graph.swaps()) swapped.insert({a, b});
  // Only blobs at `rank` are ever asked about.
  for (const auto& b : graph.blobs())
    if (b->location().rank == rank &&
        (b->has_tensor() || b->writers().empty() || b->accumulating()))
      pinned.insert(b.get());
  pinned.insert(swapped.begin(), swapped.end());
  auto free_blob = [&](const Blob* b) {
    return !pinned.count(b) && b->writers().size() == 1 && b->location().rank == rank;
  };
  // A swapped blob may be another name for a whole storage (the reshape of a concat's output):
  // swap_memory exchanges whole storages, so all that storage's views follow the swap. Not for
  // a storage that another swap exchanges as well.
  auto whole_view_ok = [&](const Blob* out, Blob* in) {
    return swapped.count(out) && !swapped.count(in) && !out->has_tensor() && !out->accumulating() &&
           out->writers().size() == 1 && out->location().rank == rank &&
           in->deferred_tensor().covers_storage();
  };
  std::set<const Op*> aliased;
  // Concat first: its inputs become views of its output, before anything allocates them.
  for (Op* op : order) {
    if (op->location().rank != rank || aliasing_of(*op) != Aliasing::kConcat) continue;
    Blob* out = op->outputs()[0];
    const int64_t axis = normalized_axis(*op, out->shape());
    bool ok = !pinned.count(out) && slices_are_contiguous(out->shape(), axis);
    std::set<const Blob*> distinct;
    for (const Blob* in : op->inputs()) {
      ok = ok && free_blob(in) && distinct.insert(in).second && in->location() == out->location();
      for (const Op* reader : in->readers())
        ok = ok && (reader == op || aliasing_of(*reader) != Aliasing::kConcat);
    }
    if (!ok) continue;
    const int64_t inner = axis < out->shape().ndim() ? out->shape().count_from(axis + 1) : 1;
    int64_t offset = 0;
    for (Blob* in : op->inputs()) {
      in->alias(out->deferred_tensor().view(offset, in->shape()));
      pinned.insert(in);
      offset += in->shape()[axis] * inner;
    }
    aliased.insert(op);
  }
  // A sum that alone reads a buffer copied in from another location (another rank, or another
  // CPU location of this one) writes its result over it: the buffer is dead once read, and the
  // sum kernel allows its output to be either input. A ring reduction then works in as many
  // buffers as it receives, not twice as many. Before split and reshape, so that views of the
  // sum's result see the shared memory.
  for (Op* op : order) {
    if (op->location().rank != rank || aliasing_of(*op) != Aliasing::kInPlace) continue;
    Blob* out = op->outputs()[0];
    if (!free_blob(out) || out->has_tensor()) continue;
    for (Blob* in : op->inputs()) {
      const bool received = in->writers().size() == 1 &&
                            in->writers()[0]->kernel().traits().bridges_locations &&
                            in->writers()[0]->inputs()[0]->location() != in->location();
      if (!received || in->readers().size() != 1 || in->location() != out->location() ||
          pinned.count(in) || in->accumulating() || !in->deferred_tensor().covers_storage())
        continue;
      out->alias(in->deferred_tensor().view(0, out->shape()));
      pinned.insert(out);
      pinned.insert(in);
      break;
    }
  }
  // Split and reshape: outputs become views of the input.
  for (Op* op : order) {
    if (op->location().rank != rank) continue;
    const bool split = aliasing_of(*op) == Aliasing::kSplit,
               reshape = aliasing_of(*op) == Aliasing::kReshape;
    if (!split && !reshape) continue;
    Blob* in = op->inputs()[0];
    bool ok = in->location() == op->location();
    for (const Blob* out : op->outputs())
      ok = ok && (free_blob(out) || (reshape && whole_view_ok(out, in)));
    int64_t axis = 0;
    if (split) {
      axis = normalized_axis(*op, in->shape());
      ok = ok && slices_are_contiguous(in->shape(), axis);
    }
    if (!ok || !in->deferred_tensor().is_contiguous()) continue;
    const int64_t inner = split && axis < in->shape().ndim() ? in->shape().count_from(axis + 1) : 1;
    int64_t offset = 0;
    for (Blob* out : op->outputs()) {
      out->alias(in->deferred_tensor().view(offset, out->shape()));
      pinned.insert(out);
      if (split) offset += out->shape()[axis] * inner;
    }
    aliased.insert(op);
  }
  return aliased;
}

}  // namespace purine
