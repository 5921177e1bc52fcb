#include "graphs/channel_blocks.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

namespace purine {

namespace {

// Groups of blobs that must be blocked together, and the blobs that must stay plain.
class BlockGroups {
 public:
  explicit BlockGroups(size_t blobs) : parent_(blobs), plain_(blobs, false) {
    std::iota(parent_.begin(), parent_.end(), 0);
  }
  size_t root(size_t i) {
    while (parent_[i] != i) i = parent_[i] = parent_[parent_[i]];
    return i;
  }
  void join(size_t a, size_t b) {
    a = root(a);
    b = root(b);
    if (a == b) return;
    parent_[b] = a;
    plain_[a] = plain_[a] || plain_[b];
  }
  void keep_plain(size_t i) { plain_[root(i)] = true; }
  bool plain(size_t i) { return plain_[root(i)]; }

 private:
  std::vector<size_t> parent_;
  std::vector<bool> plain_;
};

bool contains(const std::vector<int>& list, int i) {
  return std::find(list.begin(), list.end(), i) != list.end();
}

}  // namespace

int block_channels(Graph& graph, int block) {
  std::map<const Blob*, size_t> index;
  for (const auto& blob : graph.blobs()) index.emplace(blob.get(), index.size());
  BlockGroups groups(index.size());
  // The elements that kernels would reorder on every run if each blob stayed plain, or were
  // blocked (ChannelBlocking::reorders).
  std::vector<double> reordered_plain(index.size(), 0), reordered_blocked(index.size(), 0);
  for (const auto& entry : index) {
    const Blob* blob = entry.first;
    const Shape& shape = blob->shape();
    const bool fits = blob->location().is_cpu() && shape.ndim() == 4 && shape.count() > 0 &&
                      shape[1] % block == 0;
    if (!fits || blob->has_tensor() || blob->accumulating() || graph.held_outside_ops(blob))
      groups.keep_plain(entry.second);
  }
  for (const auto& op : graph.ops()) {
    std::vector<Shape> shapes;
    for (const Blob* input : op->inputs()) shapes.push_back(input->shape());
    const ChannelBlocking blocking =
        op->location().is_cpu() ? op->kernel().channel_blocking(shapes, block) : ChannelBlocking{};
    std::vector<size_t> allowed;
    const auto visit = [&](const Blob* blob, bool takes, bool shape_only) {
      const size_t i = index.at(blob);
      if (takes) {
        allowed.push_back(i);
        const double elements = static_cast<double>(blob->shape().count());
        if (blocking.reorders == ChannelBlocking::kInPlain) reordered_plain[i] += elements;
        if (blocking.reorders == ChannelBlocking::kInBlocks) reordered_blocked[i] += elements;
      } else if (!shape_only) {
        groups.keep_plain(i);
      }
    };
    for (int i = 0; i < static_cast<int>(op->inputs().size()); ++i) {
      visit(op->inputs()[i], contains(blocking.inputs, i), contains(blocking.shape_only, i));
    }
    for (int i = 0; i < static_cast<int>(op->outputs().size()); ++i) {
      visit(op->outputs()[i], contains(blocking.outputs, i), false);
    }
    if (blocking.kind == ChannelBlocking::kUniform) {
      for (size_t i : allowed) groups.join(allowed[0], i);
    }
  }
  // A group is blocked when that reorders no more than keeping it plain would.
  std::vector<double> group_plain(index.size(), 0), group_blocked(index.size(), 0);
  for (size_t i = 0; i < index.size(); ++i) {
    group_plain[groups.root(i)] += reordered_plain[i];
    group_blocked[groups.root(i)] += reordered_blocked[i];
  }
  int blocked = 0;
  for (const auto& blob : graph.blobs()) {
    const size_t i = index.at(blob.get()), root = groups.root(i);
    if (groups.plain(i) || group_blocked[root] > group_plain[root]) continue;
    blob->set_channel_block(block);
    ++blocked;
  }
  return blocked;
}

}  // namespace purine
