// Gradient buckets for data parallelism. Every reduction costs a fixed amount whatever its size
// (a ring of 2(N-1) messages per rank, or a collective, each with its ops and hand-overs), which
// dominates for biases and other small gradients. Fusing neighbours in the order the backward pass
// produces them into one flat buffer pays that cost once per bucket; a bucket still starts as soon
// as its last gradient exists, so reductions keep overlapping the backward pass.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "purine/graph.hpp"

namespace purine {

// Groups items of `bytes[i]` bytes, in order, into runs of consecutive indices: an item of at
// least `bucket_bytes` stands alone; smaller ones join the open bucket while its total stays
// within `bucket_bytes`, else start the next. `bucket_bytes` <= 0 puts every item alone.
std::vector<std::vector<int>> plan_buckets(const std::vector<int64_t>& bytes, int64_t bucket_bytes);

// The blobs flattened and concatenated, in order, into one 1-D blob (ops under the scope `name`,
// at the current placement).
Blob* fuse(Graph& graph, const std::string& name, const std::vector<Blob*>& blobs);
// The inverse: `flat` cut into zero-copy views shaped `shapes` (their counts must add up to
// flat's), ops under the scope `name` at the current placement.
std::vector<Blob*> unfuse(Graph& graph, const std::string& name, Blob* flat,
                          const std::vector<Shape>& shapes);

}  // namespace purine
