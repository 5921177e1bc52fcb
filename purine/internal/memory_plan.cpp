#include "purine/internal/memory_plan.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <queue>
#include <unordered_map>

namespace purine {

namespace {

// The ancestor sets take ops x (this rank's ops) bits. The plan runs while they take at most
// kPlanBudget or an eighth of the memory it may share, whichever is more, and never more than
// kPlanCeiling (92681 ops on one rank; building them is quick: ops x inputs x rank ops / 64 word
// operations).
constexpr int64_t kPlanBudget = int64_t{32} << 20;
constexpr int64_t kPlanCeiling = int64_t{1} << 30;
// A blob shares a buffer at most this many times larger or smaller than itself.
constexpr double kSizeRatio = 4;

}  // namespace

// Which ops of one rank (located there, or touching its blobs) happen before which: for every
// op of the graph, the set of its ancestors among them over the edges the dispatcher enforces
// (paths through other ranks' ops count), as bits indexed by the ancestor's place among the rank's
// ops. Every rank builds the whole graph of a layout; a rank's plan needs only its own ops' order,
// which takes that share of the bits (12 data-parallel ranks of ResNet-50: 1/12 of 5 GB).
class HappensBefore {
 public:
  // Whether `op` is the rank's or reads or writes a blob of it (a copy from another rank).
  static bool touches_rank(const Op& op, int rank) {
    if (op.location().rank == rank) return true;
    for (const Blob* b : op.inputs())
      if (b->location().rank == rank) return true;
    for (const Blob* b : op.outputs())
      if (b->location().rank == rank) return true;
    return false;
  }

  HappensBefore(const Graph& graph, int rank) : rank_(rank) {
    const auto& ops = graph.ops();
    int columns = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      index_[ops[i].get()] = static_cast<int>(i);
      if (touches_rank(*ops[i], rank)) column_[ops[i].get()] = columns++;
    }
    words_ = (static_cast<size_t>(columns) + 63) / 64;
    std::vector<int> column_of(ops.size(), -1);
    for (const auto& [op, column] : column_) column_of[index_.at(op)] = column;
    std::vector<std::vector<int>> preds(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = *ops[i];
      for (const Blob* in : op.inputs())
        for (const Op* w : in->writers()) preds[i].push_back(index_.at(w));
      for (const Op* before : op.ordered_after()) preds[i].push_back(index_.at(before));
      for (const Blob* out : op.outputs()) {
        const auto& writers = out->writers();
        auto at = std::find(writers.begin(), writers.end(), &op);
        if (at != writers.begin() && at != writers.end()) preds[i].push_back(index_.at(*(at - 1)));
      }
    }
    // Kahn's order over those edges; the graph validated, so they make no cycle.
    std::vector<int> pending(ops.size());
    std::vector<std::vector<int>> succs(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      pending[i] = static_cast<int>(preds[i].size());
      for (int p : preds[i]) succs[p].push_back(static_cast<int>(i));
    }
    std::queue<int> ready;
    for (size_t i = 0; i < ops.size(); ++i)
      if (pending[i] == 0) ready.push(static_cast<int>(i));
    bits_.assign(ops.size() * words_, 0);
    position_.assign(ops.size(), -1);
    int next = 0;
    while (!ready.empty()) {
      const int v = ready.front();
      ready.pop();
      position_[v] = next++;
      uint64_t* mine = row(v);
      for (int p : preds[v]) {
        const uint64_t* theirs = row(p);
        for (size_t w = 0; w < words_; ++w) mine[w] |= theirs[w];
        if (column_of[p] >= 0) mine[column_of[p] / 64] |= uint64_t{1} << (column_of[p] % 64);
      }
      for (int s : succs[v])
        if (--pending[s] == 0) ready.push(s);
    }
    CHECK_EQ(next, static_cast<int>(ops.size())) << "graph '" << graph.name() << "' has a cycle";
  }

  int rank() const { return rank_; }

  // Whether `a` finishes before `b` starts in every run.
  // (`a` on the rank; of another rank's op nothing is known.)
  bool before(const Op* a, const Op* b) const {
    const auto column = column_.find(a);
    if (column == column_.end()) return false;
    const int i = column->second;
    return (row(index_.at(b))[i / 64] >> (i % 64)) & 1;
  }
  // The op's place in one order that respects every edge.
  int position(const Op* op) const { return position_[index_.at(op)]; }

 private:
  uint64_t* row(int v) { return bits_.data() + static_cast<size_t>(v) * words_; }
  const uint64_t* row(int v) const { return bits_.data() + static_cast<size_t>(v) * words_; }
  const int rank_;
  size_t words_ = 0;
  std::vector<uint64_t> bits_;
  std::unordered_map<const Op*, int> index_;   // row: the op's place in graph.ops()
  std::unordered_map<const Op*, int> column_;  // bit: the op's place among the rank's ops
  std::vector<int> position_;                  // in Kahn's order
};

namespace {

// The blobs sharing one storage (a root and its views) and the ops touching them.
struct StorageGroup {
  Storage* storage = nullptr;
  std::vector<const Blob*> blobs;
  std::set<const Op*> writers;
  std::set<const Op*> accessors;  // writers and readers
  bool reusable = true;
  int first_write = 0;  // the earliest writer's position in HappensBefore's order
};

// A blob whose value lives within one run (see memory_plan.hpp).
bool run_local(const Blob& blob, const std::set<const Blob*>& swapped,
               const std::set<const Blob*>& observed, const HappensBefore& order) {
  if (blob.accumulating() || swapped.count(&blob) || observed.count(&blob)) return false;
  if (blob.writers().size() != 1) return false;
  const Op* writer = blob.writers()[0];
  for (const Op* reader : blob.readers())
    if (!order.before(writer, reader)) return false;
  return true;
}

struct SharedBuffer {
  Location location;
  int64_t count = 0;
  std::vector<StorageGroup*> occupants;  // in the order they use it
};

// Whether `next` may use the buffer after `last`: everything touching `last` happens before
// anything writing `next`.
bool free_for(const StorageGroup& last, const StorageGroup& next, const HappensBefore& order) {
  for (const Op* a : last.accessors)
    for (const Op* w : next.writers)
      if (!order.before(a, w)) return false;
  return true;
}

}  // namespace

MemoryPlanner::MemoryPlanner(Graph& graph) : graph_(graph) {}
MemoryPlanner::~MemoryPlanner() = default;

MemoryPlanResult plan_memory(Graph& graph, int rank, bool reuse,
                             const std::set<const Blob*>& observed, bool allocate) {
  return MemoryPlanner(graph).plan(rank, reuse, observed, allocate);
}

MemoryPlanResult MemoryPlanner::plan(int rank, bool reuse, const std::set<const Blob*>& observed,
                                     bool allocate) {
  Graph& graph = graph_;
  // This rank's storages without memory, each with the blobs on it.
  std::map<Storage*, StorageGroup> groups;
  std::vector<Storage*> group_order;  // first seen, for a deterministic plan
  for (const auto& b : graph.blobs()) {
    if (b->location().rank != rank) continue;
    Storage* storage = b->deferred_tensor().storage();
    if (storage->bound()) continue;
    auto [it, fresh] = groups.try_emplace(storage);
    if (fresh) group_order.push_back(storage);
    StorageGroup& group = it->second;
    group.storage = storage;
    group.blobs.push_back(b.get());
    group.writers.insert(b->writers().begin(), b->writers().end());
    group.accessors.insert(b->writers().begin(), b->writers().end());
    group.accessors.insert(b->readers().begin(), b->readers().end());
  }

  MemoryPlanResult result;
  std::vector<SharedBuffer> buffers;
  if (reuse) {
    int64_t unshared = 0;
    for (Storage* s : group_order) unshared += s->count() * static_cast<int64_t>(sizeof(float));
    const auto ops = static_cast<int64_t>(graph.ops().size());
    int64_t rank_ops = 0;
    for (const auto& op : graph.ops()) rank_ops += HappensBefore::touches_rank(*op, rank);
    const int64_t plan_bytes = ops * ((rank_ops + 63) / 64) * 8;
    if (plan_bytes > std::min(kPlanCeiling, std::max(kPlanBudget, unshared / 8))) {
      LOG(WARNING) << "graph '" << graph.name() << "' has " << ops << " ops, " << rank_ops
                   << " of rank " << rank << ": ordering them for its memory plan would take "
                   << (plan_bytes >> 20) << " MB, too much for the " << (unshared >> 20)
                   << " MB it could share; every blob gets memory of its own";
      reuse = false;
    }
  }
  if (reuse) {
    if (!order_ || order_->rank() != rank) {
      order_.reset();  // before the next: one rank's bits at a time
      order_ = std::make_unique<HappensBefore>(graph, rank);
    }
    const HappensBefore& order = *order_;
    std::set<const Blob*> swapped;
    for (const auto& [a, b] : graph.swaps()) swapped.insert({a, b});
    std::vector<StorageGroup*> candidates;
    for (Storage* s : group_order) {
      StorageGroup& group = groups.at(s);
      for (const Blob* b : group.blobs)
        group.reusable = group.reusable && run_local(*b, swapped, observed, order);
      if (!group.reusable || group.writers.empty()) continue;
      group.first_write = static_cast<int>(graph.ops().size());
      for (const Op* w : group.writers)
        group.first_write = std::min(group.first_write, order.position(w));
      candidates.push_back(&group);
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const StorageGroup* a, const StorageGroup* b) {
                       return a->first_write < b->first_write;
                     });
    // Greedy: each storage, in order of its first write, takes the free buffer nearest its size
    // (a smaller one grows), or a new one when none is within kSizeRatio: a small blob would
    // otherwise hold a large buffer that a large blob written later then cannot have.
    for (StorageGroup* group : candidates) {
      const int64_t need = group->storage->count();
      auto distance = [need](const SharedBuffer& b) {
        return std::max(b.count, need) /
               static_cast<double>(std::max<int64_t>(1, std::min(b.count, need)));
      };
      SharedBuffer* best = nullptr;
      for (SharedBuffer& buffer : buffers) {
        if (buffer.location != group->storage->location() || distance(buffer) > kSizeRatio ||
            !free_for(*buffer.occupants.back(), *group, order))
          continue;
        if (!best || distance(buffer) < distance(*best)) best = &buffer;
      }
      if (!best) {
        buffers.push_back({group->storage->location(), need, {}});
        best = &buffers.back();
      } else {
        const StorageGroup& last = *best->occupants.back();
        for (const Op* a : last.accessors)
          for (const Op* w : group->writers) result.orders.emplace_back(a, w);
        result.plan.overwritten.insert(last.blobs.begin(), last.blobs.end());
      }
      best->count = std::max(best->count, need);
      best->occupants.push_back(group);
    }
  }

  if (!allocate) return result;
  // Memory for every storage: the shared buffers, and a buffer of its own for the rest.
  for (const SharedBuffer& shared : buffers) {
    auto memory = std::make_shared<Buffer>(shared.count, shared.location);
    for (StorageGroup* group : shared.occupants) group->storage->bind(memory);
  }
  for (Storage* s : group_order) {
    MemoryUse& use = result.plan.by_location[s->location()];
    use.blob_bytes += s->count() * static_cast<int64_t>(sizeof(float));
    if (s->bound()) continue;
    s->bind(std::make_shared<Buffer>(s->count(), s->location()));
    use.allocated_bytes += s->count() * static_cast<int64_t>(sizeof(float));
    ++use.buffers;
  }
  for (const SharedBuffer& shared : buffers) {
    MemoryUse& use = result.plan.by_location[shared.location];
    use.allocated_bytes += shared.count * static_cast<int64_t>(sizeof(float));
    ++use.buffers;
  }
  return result;
}

}  // namespace purine
