// The memory plan of compile(): after the zero-copy views (purine/internal/views.hpp) every blob
// of the rank without memory gets a deferred storage (views share their root's), and this step
// gives each storage a buffer. With reuse, storages whose values are never needed at the same
// time share one buffer: storage Y may take over X's buffer when every op touching X's blobs
// happens before every op writing Y's, by the dependencies the dispatcher enforces (data edges,
// the writers of an accumulating blob in order, Graph::add_order), followed through all ranks
// of the graph. That makes the plan follow the schedule: under 1F1B a stage's next micro-batch
// starts after an earlier one's backward pass, so it reuses that one's activations, while under
// GPipe every forward precedes every backward and nothing is shared.
//
// Only blobs whose values live within one run take part: one writer that every reader follows,
// not accumulating, not swapped, not observed (read by the host after a run) and without memory
// before compile (parameters, fed inputs, tensors shared with another graph keep theirs).
// Where the proof of "happens before" passes through another rank, the dispatcher of this rank
// cannot see it, so the plan returns those pairs as orders for the compiled plan (MPI also
// forbids reusing a send buffer before its send completed). The proofs take ops² bits; a graph
// whose bits would outweigh an eighth of the memory it could share (and 32 MB) skips sharing,
// with a warning.
#pragma once

#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "purine/compile.hpp"
#include "purine/graph.hpp"

namespace purine {

struct MemoryPlanResult {
  MemoryPlan plan;
  // (before, after): ops of this rank that must finish before others start, so that a reused
  // buffer is free when written (many are implied by the plan's other dependencies already).
  std::vector<std::pair<const Op*, const Op*>> orders;
};

// Binds memory to every blob of `rank` that has none; shares buffers when `reuse`. Without
// `allocate` it only plans: the orders, and which blobs are overwritten (a simulation's).
MemoryPlanResult plan_memory(Graph& graph, int rank, bool reuse,
                             const std::set<const Blob*>& observed, bool allocate = true);

class HappensBefore;

// plan_memory() for several ranks of one graph: the order of a rank's ops (ops x rank ops bits)
// is made at its first plan with reuse and kept while the next plan is of the same rank. The graph
// must outlive it and keep its ops and edges.
class MemoryPlanner {
 public:
  explicit MemoryPlanner(Graph& graph);
  ~MemoryPlanner();
  MemoryPlanner(const MemoryPlanner&) = delete;
  MemoryPlanner& operator=(const MemoryPlanner&) = delete;
  MemoryPlanResult plan(int rank, bool reuse, const std::set<const Blob*>& observed,
                        bool allocate = true);

 private:
  Graph& graph_;
  std::unique_ptr<HappensBefore> order_;
};

}  // namespace purine
