// Zero-copy views, by the operators' aliasing traits (operators/operator.hpp): while a graph is
// compiled, split, concat and reshape ops (kSplit, kConcat, kReshape) whose slices are
// contiguous get their outputs (split, reshape) or inputs (concat) made views of the memory on
// the other side, and then have nothing to compute. Slices along an axis are contiguous when
// every dimension before it is 1 (always true for axis 0 of a 1-D blob). Blobs that are swapped
// between runs, shared with another graph, already allocated, or read by a second concat keep
// their own memory and the op copies as usual. Last, an in-place op (kInPlace: sum) that is the
// only reader of a buffer copied in from another location writes its result over that buffer.
#pragma once

#include <set>
#include <vector>

#include "purine/graph.hpp"

namespace purine {

// Applies the views for the ops located at `rank`; returns the ops that no longer compute (the
// in-place sums still do).
std::set<const Op*> alias_views(Graph& graph, int rank);
// The same, given graph.topological_order() (views change no edge, so one order serves every
// rank: memory_plan_orders() applies the views of each rank of a layout in turn).
std::set<const Op*> alias_views(Graph& graph, int rank, const std::vector<Op*>& order);

}  // namespace purine
