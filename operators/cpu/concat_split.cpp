#include "operators/concat_split.hpp"

#include <algorithm>
#include <cstring>

#include "base/error.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/registry.hpp"

namespace purine {

namespace {

int resolve_axis(const std::string& type, int64_t axis, const Shape& shape, const char* what) {
  const int64_t rank = shape.ndim();
  require(axis >= -rank && axis < rank, type, ": attribute 'axis' is ", axis, " but ", what,
          " has ", rank, " dimensions ", shape, "; expected -", rank, " <= axis < ", rank);
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

std::vector<int64_t> checked_sizes(const std::string& type, const Attrs& attrs) {
  require(attrs.has("sizes"), type,
          ": missing attribute 'sizes' (the extents of the parts along 'axis')");
  std::vector<int64_t> sizes = attrs.get_ints("sizes", {});
  require(!sizes.empty(), type,
          ": attribute 'sizes' is empty; expected one extent "
          "per part");
  for (size_t k = 0; k < sizes.size(); ++k) {
    require(sizes[k] >= 0, type, ": attribute 'sizes' has ", sizes[k], " at position ", k,
            "; expected extents >= 0");
  }
  return sizes;
}

bool all_contiguous(const std::vector<const Tensor*>& a, const std::vector<Tensor*>& b) {
  for (const Tensor* t : a) {
    if (!t->is_contiguous()) return false;
  }
  for (const Tensor* t : b) {
    if (!t->is_contiguous()) return false;
  }
  return true;
}

// The block layout of a contiguous tensor cut along `axis`: `outer` rows, each the parts'
// blocks of extents[k] * inner elements one after the other.
struct Blocks {
  Blocks(const Shape& whole, int axis)
      : outer(whole.count_to(axis)),
        inner(whole.count_from(axis + 1)),
        row(whole[axis] * inner),
        parallel(whole.count() > kParallelMinCopy && outer > 1) {}
  int64_t outer, inner, row;
  bool parallel;
};

// A whole of one row (a concat or split along the first axis: sibling convolutions' weights,
// gradient buckets) is copied in pieces of this many floats, split among the threads: one thread
// alone copied 2 M floats in 217 us, two in 105 (2 Zen 5 cores, warm caches).
constexpr int64_t kRowPiece = int64_t{1} << 15;

// copy(whole_at, part, part_at, count) for the pieces of one row made of parts of extents[k] *
// inner floats each, on the team when the row is long enough.
template <class Copy>
void copy_row_in_pieces(const std::vector<int64_t>& extents, int64_t inner, int64_t row,
                        Copy copy) {
  std::vector<int64_t> lengths;
  for (int64_t e : extents) lengths.push_back(e * inner);
  const int64_t pieces = (row + kRowPiece - 1) / kRowPiece;
  parallel_for(pieces, row > kParallelMinCopy, [&](int64_t piece) {
    const int64_t begin = piece * kRowPiece, end = std::min(row, begin + kRowPiece);
    int64_t part_begin = 0;
    for (size_t k = 0; k < lengths.size() && part_begin < end; part_begin += lengths[k++]) {
      const int64_t from = std::max(begin, part_begin), to = std::min(end, part_begin + lengths[k]);
      if (from < to) copy(from, k, from - part_begin, to - from);
    }
  });
}

// concat of contiguous tensors: parts[k] is [outer, extents[k] * inner].
void gather(float* whole, const std::vector<const float*>& parts,
            const std::vector<int64_t>& extents, const Blocks& b) {
  const int64_t n = static_cast<int64_t>(parts.size());
  if (b.outer == 1) {
    copy_row_in_pieces(extents, b.inner, b.row,
                       [&](int64_t at, size_t k, int64_t part_at, int64_t count) {
                         std::memcpy(whole + at, parts[k] + part_at, count * sizeof(float));
                       });
    return;
  }
  parallel_for(b.outer, b.parallel, [&](int64_t o) {
    float* dst = whole + o * b.row;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t block = extents[k] * b.inner;
      std::memcpy(dst, parts[k] + o * block, block * sizeof(float));
      dst += block;
    }
  });
}

// split of a contiguous tensor, the inverse of gather().
void scatter(const float* whole, const std::vector<float*>& parts,
             const std::vector<int64_t>& extents, const Blocks& b) {
  const int64_t n = static_cast<int64_t>(parts.size());
  if (b.outer == 1) {
    copy_row_in_pieces(extents, b.inner, b.row,
                       [&](int64_t at, size_t k, int64_t part_at, int64_t count) {
                         std::memcpy(parts[k] + part_at, whole + at, count * sizeof(float));
                       });
    return;
  }
  parallel_for(b.outer, b.parallel, [&](int64_t o) {
    const float* src = whole + o * b.row;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t block = extents[k] * b.inner;
      std::memcpy(parts[k] + o * block, src, block * sizeof(float));
      src += block;
    }
  });
}

// Whether parts of `extents` channels of `whole` can be cut or joined in channel blocks of
// `block` (ConcatOp::channel_blocking).
bool channel_parts_take_blocks(const Shape& whole, int64_t axis,
                               const std::vector<int64_t>& extents, int block) {
  if (whole.ndim() != 4 || (axis != 1 && axis != -3) || whole[0] < 2) return false;
  for (int64_t e : extents) {
    if (e % block != 0) return false;
  }
  return true;
}

}  // namespace

ConcatOp::ConcatOp(Attrs attrs)
    : TypedOperator(std::move(attrs)), axis_(attrs_.get_int("axis", 1)) {}

std::vector<Shape> ConcatOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  const int axis = resolve_axis(type(), axis_, inputs[0], "input 0");
  Shape out = inputs[0];
  for (size_t k = 1; k < inputs.size(); ++k) {
    const Shape& s = inputs[k];
    bool same = s.ndim() == out.ndim();
    for (int d = 0; same && d < s.ndim(); ++d) same = d == axis || s[d] == out[d];
    require(same, type(), ": input ", k, " has shape ", s, " but input 0 has ", inputs[0],
            "; expected equal extents in every dimension but axis ", axis);
    out[axis] += s[axis];
  }
  return {out};
}

GradientSpec ConcatOp::gradient() const {
  throw Error(str(type(), ": the gradient depends on the inputs' extents; call gradient_for()"));
}

GradientSpec ConcatOp::gradient_for(const std::vector<Shape>& input_shapes) const {
  require(!input_shapes.empty(), type(), ": expected at least one input, got none");
  const int axis = resolve_axis(type(), axis_, input_shapes[0], "input 0");
  std::vector<int64_t> sizes;
  for (const Shape& s : input_shapes) {
    require(s.ndim() > axis, type(), ": input shape ", s, " has no axis ", axis);
    sizes.push_back(s[axis]);
  }
  GradOp split{
      SplitOp::kType, Attrs().set("axis", axis_).set("sizes", sizes), {output_grad(0)}, {}};
  for (size_t k = 0; k < sizes.size(); ++k) split.outputs.push_back(input_grad(k));
  GradientSpec spec;
  spec.ops.push_back(std::move(split));
  return spec;
}

ChannelBlocking ConcatOp::channel_blocking(const std::vector<Shape>& inputs, int block) const {
  std::vector<int64_t> extents;
  for (const Shape& x : inputs) {
    if (x.ndim() != 4) return {};
    extents.push_back(x[1]);
  }
  if (extents.empty()) return {};
  if (!channel_parts_take_blocks(inputs[0], axis_, extents, block)) return {};
  return ChannelBlocking::uniform_all(static_cast<int>(inputs.size()), 1);
}

void ConcatOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                           const std::vector<Tensor*>& outputs, OpContext&) {
  Tensor& y = *outputs[0];
  const int axis = resolve_axis(type(), axis_, y.shape(), "output 0");
  if (all_contiguous(inputs, outputs)) {
    std::vector<const float*> parts;
    std::vector<int64_t> extents;
    for (const Tensor* x : inputs) {
      parts.push_back(x->data());
      extents.push_back(x->shape()[axis]);
    }
    gather(y.mutable_data(), parts, extents, Blocks(y.shape(), axis));
    return;
  }
  int64_t begin = 0;
  for (const Tensor* x : inputs) {
    const int64_t end = begin + x->shape()[axis];
    y.slice(axis, begin, end).copy_from(*x);
    begin = end;
  }
}

SplitOp::SplitOp(Attrs attrs)
    : TypedOperator(std::move(attrs)),
      axis_(attrs_.get_int("axis", 1)),
      sizes_(checked_sizes("split", attrs_)) {}

std::vector<Shape> SplitOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), sizes_.size());
  const int axis = resolve_axis(type(), axis_, inputs[0], "input 0");
  int64_t total = 0;
  for (int64_t s : sizes_) total += s;
  require(total == inputs[0][axis], type(), ": attribute 'sizes' sums to ", total, " but input 0 ",
          inputs[0], " has extent ", inputs[0][axis], " along axis ", axis, "; expected equal");
  std::vector<Shape> out;
  for (int64_t s : sizes_) {
    Shape part = inputs[0];
    part[axis] = s;
    out.push_back(part);
  }
  return out;
}

GradientSpec SplitOp::gradient() const {
  GradOp concat{ConcatOp::kType, Attrs().set("axis", axis_), {}, {input_grad(0)}};
  for (size_t k = 0; k < sizes_.size(); ++k) concat.inputs.push_back(output_grad(k));
  GradientSpec spec;
  spec.ops.push_back(std::move(concat));
  return spec;
}

ChannelBlocking SplitOp::channel_blocking(const std::vector<Shape>& inputs, int block) const {
  if (!channel_parts_take_blocks(inputs[0], axis_, sizes_, block)) return {};
  return ChannelBlocking::uniform_all(1, num_outputs());
}

void SplitOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                          const std::vector<Tensor*>& outputs, OpContext&) {
  const Tensor& x = *inputs[0];
  const int axis = resolve_axis(type(), axis_, x.shape(), "input 0");
  if (all_contiguous(inputs, outputs)) {
    std::vector<float*> parts;
    for (Tensor* y : outputs) parts.push_back(y->mutable_data());
    scatter(x.data(), parts, sizes_, Blocks(x.shape(), axis));
    return;
  }
  int64_t begin = 0;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const int64_t end = begin + sizes_[k];
    outputs[k]->copy_from(x.slice(axis, begin, end));
    begin = end;
  }
}

PURINE_REGISTER_OPERATOR(ConcatOp);
PURINE_REGISTER_OPERATOR(SplitOp);

}  // namespace purine
