#include "graphs/allreduce.hpp"

#include <algorithm>
#include <set>

#include "base/error.hpp"

namespace purine {

namespace {

void check_parts(const std::string& name, const std::vector<Blob*>& parts) {
  require(!parts.empty(), name, ": no blobs to reduce");
  std::set<Location> seen;
  for (const Blob* b : parts) {
    require(b->shape() == parts[0]->shape(), name, ": blob '", b->name(), "' has shape ",
            b->shape(), " but '", parts[0]->name(), "' has ", parts[0]->shape());
    require(seen.insert(b->location()).second, name, ": two blobs at ", b->location(),
            "; give one blob per location");
  }
}

// The ring's chunks of `count` elements over `n` ranks: chunk c has sizes[c] consecutive elements.
// Fewer elements than ranks leaves some chunks empty; they take no ops at all.
std::vector<int64_t> ring_chunk_sizes(int64_t count, int n) {
  std::vector<int64_t> sizes;
  for (int c = 0; c < n; ++c) sizes.push_back(count / n + (c < count % n ? 1 : 0));
  return sizes;
}

}  // namespace

int64_t ring_segment_bytes(int ranks) {
  return ranks >= kRingSegmentMinRanks ? kRingSegmentBytes : 0;
}

namespace {

// A chunk's segments: at most `segment_bytes` each (0: one), as even as can be.
std::vector<int64_t> segment_sizes(int64_t elements, int64_t segment_bytes) {
  const int64_t bytes = elements * static_cast<int64_t>(sizeof(float));
  const int64_t pieces =
      segment_bytes > 0 ? std::max<int64_t>(1, (bytes + segment_bytes - 1) / segment_bytes) : 1;
  std::vector<int64_t> sizes;
  for (int64_t k = 0; k < pieces; ++k)
    sizes.push_back(elements / pieces + (k < elements % pieces ? 1 : 0));
  return sizes;
}

// `chunk` (flat) as views of its segments, built at the current placement.
std::vector<Blob*> split_segments(Graph& g, const std::string& name, Blob* chunk,
                                  const std::vector<int64_t>& sizes) {
  if (sizes.size() == 1) return {chunk};
  return g.apply(name + "_split", "split", Attrs().set("axis", 0).set("sizes", sizes), {chunk});
}

// Segments (or chunks) joined into one flat blob, built at the current placement.
Blob* joined(Graph& g, const std::string& name, const std::vector<Blob*>& pieces) {
  if (pieces.size() == 1) return pieces[0];
  return g.apply(name + "_concat", "concat", Attrs().set("axis", 0), pieces)[0];
}

// "<what><s>_c<c>", and "_k<k>" for the segments of a chunk in several.
std::string step_name(const char* what, int s, int c, size_t k, size_t segments) {
  std::string name = what + std::to_string(s) + "_c" + std::to_string(c);
  return segments > 1 ? name + "_k" + std::to_string(k) : name;
}

// The sum of chunk c of N parts in the ring's order: the ring's reduce-scatter starts chunk c on
// rank c and every step adds the next rank's part (x_c + x_(c+1) + ... + x_(c-1)); a sum op adds
// its inputs in order, so the result has the ring's bits. `chunk(q)`: part q's chunk c, here.
template <typename Chunk>
Blob* sum_in_ring_order(Graph& g, const std::string& name, int c, int n, Chunk chunk) {
  std::vector<Blob*> terms;
  for (int k = 0; k < n; ++k) terms.push_back(chunk((c + k) % n));
  return g.apply(name, "sum", {}, terms)[0];
}

// The direct reduce-scatter: every rank sends chunk c straight to its owner, which sums the N
// chunks in the ring's order. Returns, per rank, its sum as one segment (none where its chunk
// is empty).
std::vector<std::vector<Blob*>> direct_reduce_scatter(Graph& g, const std::vector<Blob*>& parts,
                                                      const RingShards& shards) {
  const int n = static_cast<int>(parts.size());
  std::vector<std::vector<Blob*>> chunks;
  for (int q = 0; q < n; ++q) {
    Graph::Placement placement(g, shards.locations[q], Graph::kCommThread);
    chunks.push_back(flat_chunks(g, "r" + std::to_string(q), parts[q], shards));
  }
  std::vector<std::vector<Blob*>> owned(n);
  for (int r = 0; r < n; ++r) {
    const int c = shards.chunk_of(r);
    if (!chunks[r][c]) continue;
    const Location here = shards.locations[r];
    Graph::Placement placement(g, here, Graph::kCommThread);
    owned[r] = {sum_in_ring_order(g, "ds_c" + std::to_string(c), c, n, [&](int q) {
      return q == r ? chunks[r][c] : g.copy_to(chunks[q][c], here, Graph::kCommThread);
    })};
  }
  return owned;
}

// The reduce-scatter: fills `shards` and returns, per rank, the segments of the chunk it owns
// (empty where that chunk is).
std::vector<std::vector<Blob*>> reduce_scatter(Graph& g, const std::vector<Blob*>& parts,
                                               const RingOptions& options, RingShards& shards) {
  const int n = static_cast<int>(parts.size());
  shards.shape = parts[0]->shape();
  for (Blob* b : parts) shards.locations.push_back(b->location());
  shards.sizes = ring_chunk_sizes(shards.shape.count(), n);
  shards.direct = options.steps == RingSteps::kDirect;
  const int64_t segment_bytes = shards.direct               ? 0
                                : options.segment_bytes < 0 ? ring_segment_bytes(n)
                                                            : options.segment_bytes;
  for (int64_t size : shards.sizes) shards.segments.push_back(segment_sizes(size, segment_bytes));
  if (shards.direct) return direct_reduce_scatter(g, parts, shards);
  auto at = [&](int r) { return parts[r]->location(); };
  // acc[r][c][k]: rank r's running sum of segment k of chunk c.
  std::vector<std::vector<std::vector<Blob*>>> acc(n, std::vector<std::vector<Blob*>>(n));
  for (int r = 0; r < n; ++r) {
    Graph::Placement placement(g, at(r), Graph::kCommThread);
    const std::string local = "r" + std::to_string(r);
    const std::vector<Blob*> chunks = flat_chunks(g, local, parts[r], shards);
    for (int c = 0; c < n; ++c)
      if (chunks[c])
        acc[r][c] =
            split_segments(g, local + "_c" + std::to_string(c), chunks[c], shards.segments[c]);
  }
  // At step s rank r passes its sum of chunk r-s to rank r+1, which adds its own, segment by
  // segment. Afterwards rank r holds the whole sum of chunk r+1.
  for (int s = 0; s + 1 < n; ++s) {
    for (int r = 0; r < n; ++r) {
      const int c = ((r - s) % n + n) % n, next = (r + 1) % n;
      Graph::Placement placement(g, at(next), Graph::kCommThread);
      const size_t segments = acc[r][c].size();
      for (size_t k = 0; k < segments; ++k) {
        Blob* incoming = g.copy_to(acc[r][c][k], at(next), Graph::kCommThread);
        acc[next][c][k] =
            g.apply(step_name("rs", s, c, k, segments), "sum", {}, {acc[next][c][k], incoming})[0];
      }
    }
  }
  std::vector<std::vector<Blob*>> owned;
  for (int r = 0; r < n; ++r) owned.push_back(acc[r][shards.chunk_of(r)]);
  return owned;
}

// The all-gather of `owned` (per rank, the segments of its chunk): the whole at every location.
std::vector<Blob*> all_gather(Graph& g, const RingShards& shards,
                              const std::vector<std::vector<Blob*>>& owned) {
  const int n = static_cast<int>(shards.locations.size());
  // Each chunk travels once around the ring from its owner, segment by segment; with direct
  // steps the owner sends it to every rank itself.
  std::vector<std::vector<std::vector<Blob*>>> whole(n, std::vector<std::vector<Blob*>>(n));
  for (int owner = 0; owner < n; ++owner) {
    const int c = shards.chunk_of(owner);
    whole[owner][c] = owned[owner];
    for (int hop = 1, holder = owner; hop < n; ++hop) {
      const int next = (holder + 1) % n;
      for (Blob* segment : whole[shards.direct ? owner : holder][c])
        whole[next][c].push_back(g.copy_to(segment, shards.locations[next], Graph::kCommThread));
      holder = next;
    }
  }
  std::vector<Blob*> results;
  for (int r = 0; r < n; ++r) {
    Graph::Placement placement(g, shards.locations[r], Graph::kCommThread);
    const std::string local = "r" + std::to_string(r);
    std::vector<Blob*> pieces;
    for (int c = 0; c < n; ++c) pieces.insert(pieces.end(), whole[r][c].begin(), whole[r][c].end());
    results.push_back(g.apply(local + "_sum", "reshape", Attrs().set("shape", shards.shape.dims()),
                              {joined(g, local, pieces)})[0]);
  }
  return results;
}

}  // namespace

RingShards ring_reduce_scatter(Graph& g, const std::string& name, const std::vector<Blob*>& parts,
                               const RingOptions& options) {
  check_parts(name, parts);
  Graph::Scope scope(g, name);
  RingShards shards;
  const std::vector<std::vector<Blob*>> owned = reduce_scatter(g, parts, options, shards);
  for (size_t r = 0; r < owned.size(); ++r) {
    if (owned[r].empty()) {
      shards.owned.push_back(nullptr);
      continue;
    }
    Graph::Placement placement(g, parts[r]->location(), Graph::kCommThread);
    shards.owned.push_back(joined(g, "own" + std::to_string(r), owned[r]));
  }
  return shards;
}

std::vector<Blob*> flat_chunks(Graph& g, const std::string& name, Blob* whole,
                               const RingShards& shards) {
  const int n = static_cast<int>(shards.sizes.size());
  const int64_t count = shards.shape.count();
  Blob* flat = g.apply(name + "_flat", "reshape", Attrs().set("shape", std::vector<int64_t>{count}),
                       {whole})[0];
  std::vector<int64_t> live_sizes;
  for (int64_t size : shards.sizes)
    if (size > 0) live_sizes.push_back(size);
  std::vector<Blob*> live = {flat};
  if (live_sizes.size() > 1) {
    Attrs split;
    split.set("axis", 0).set("sizes", live_sizes);
    live = g.apply(name + "_split", "split", split, {flat});
  }
  std::vector<Blob*> chunks(n, nullptr);
  for (int c = 0, k = 0; c < n; ++c)
    if (shards.sizes[c] > 0) chunks[c] = live[k++];
  return chunks;
}

std::vector<Blob*> ring_all_gather(Graph& g, const std::string& name, const RingShards& shards,
                                   const std::vector<Blob*>& owned) {
  const int n = static_cast<int>(shards.locations.size());
  require(static_cast<int>(owned.size()) == n, name, ": ", owned.size(), " chunks for ", n,
          " ranks");
  Graph::Scope scope(g, name);
  std::vector<std::vector<Blob*>> segments(n);
  for (int r = 0; r < n; ++r) {
    const int c = shards.chunk_of(r);
    if (shards.sizes[c] == 0) continue;
    Graph::Placement placement(g, shards.locations[r], Graph::kCommThread);
    segments[r] = split_segments(g, "own" + std::to_string(r), owned[r], shards.segments[c]);
  }
  return all_gather(g, shards, segments);
}

std::vector<Blob*> exchange_allreduce(Graph& g, const std::string& name,
                                      const std::vector<Blob*>& parts) {
  check_parts(name, parts);
  const int n = static_cast<int>(parts.size());
  if (n == 1) return parts;
  Graph::Scope scope(g, name);
  // The ring's chunk layout, to sum each chunk in the ring's order.
  RingShards layout;
  layout.shape = parts[0]->shape();
  layout.sizes = ring_chunk_sizes(layout.shape.count(), n);
  auto at = [&](int r) { return parts[r]->location(); };
  std::vector<Blob*> results;
  for (int r = 0; r < n; ++r) {
    Graph::Placement placement(g, at(r), Graph::kCommThread);
    const std::string local = "x" + std::to_string(r);
    // here[q]: part q, whole, at location r (one message from q; the own part as it is).
    std::vector<Blob*> here(n);
    for (int q = 0; q < n; ++q)
      here[q] = q == r ? parts[r] : g.copy_to(parts[q], at(r), Graph::kCommThread);
    // Each chunk summed in the ring's order. With 2 parts both orders are one (a + b == b + a
    // in IEEE arithmetic): one sum over the whole buffer.
    Blob* total = nullptr;
    if (n == 2) {
      total = g.apply(local + "_add", "sum", {}, {here[0], here[1]})[0];
    } else {
      std::vector<std::vector<Blob*>> chunks(n);
      for (int q = 0; q < n; ++q)
        chunks[q] = flat_chunks(g, local + "_p" + std::to_string(q), here[q], layout);
      std::vector<Blob*> sums;
      for (int c = 0; c < n; ++c) {
        if (layout.sizes[c] == 0) continue;
        sums.push_back(sum_in_ring_order(g, local + "_add_c" + std::to_string(c), c, n,
                                         [&](int q) { return chunks[q][c]; }));
      }
      total = sums[0];
      if (sums.size() > 1)
        total = g.apply(local + "_concat", "concat", Attrs().set("axis", 0), sums)[0];
    }
    results.push_back(
        g.apply(local + "_sum", "reshape", Attrs().set("shape", layout.shape.dims()), {total})[0]);
  }
  return results;
}

std::vector<Blob*> ring_allreduce(Graph& g, const std::string& name,
                                  const std::vector<Blob*>& parts, const RingOptions& options) {
  check_parts(name, parts);
  if (parts.size() == 1) return parts;
  const int64_t received = static_cast<int64_t>(parts.size() - 1) * parts[0]->shape().count() *
                           static_cast<int64_t>(sizeof(float));
  if (received <= options.exchange_max_bytes) return exchange_allreduce(g, name, parts);
  Graph::Scope scope(g, name);
  RingShards shards;
  // The owners' segments go on around the ring as they are, never joined.
  return all_gather(g, shards, reduce_scatter(g, parts, options, shards));
}

namespace {

// One collective op of `type` per part, each part on a rank of its own, at `where(part)`.
template <typename Where>
std::vector<Blob*> collective_per_rank(Graph& g, const std::string& name, const char* type,
                                       const char* library, const std::vector<Blob*>& parts,
                                       Where where) {
  check_parts(name, parts);
  std::set<int> ranks;
  for (const Blob* b : parts)
    require(ranks.insert(b->location().rank).second, name, ": two blobs on rank ",
            b->location().rank, " (one at ", b->location(), "); ", library,
            " joins one blob per rank: reduce within a rank by ring or ps");
  Graph::Scope scope(g, name);
  std::vector<Blob*> results;
  for (size_t r = 0; r < parts.size(); ++r) {
    Graph::Placement placement(g, where(parts[r]->location()), Graph::kCommThread);
    results.push_back(g.apply("r" + std::to_string(r), type, {}, {parts[r]})[0]);
  }
  return results;
}

}  // namespace

std::vector<Blob*> mpi_allreduce(Graph& g, const std::string& name,
                                 const std::vector<Blob*>& parts) {
  // MPI reduces host memory: a GPU part goes through its rank's CPU (the builder's copies).
  return collective_per_rank(g, name, "mpi_allreduce", "MPI_Allreduce", parts,
                             [](Location l) { return l.is_cpu() ? l : Location::cpu(l.rank); });
}

std::vector<Blob*> nccl_allreduce(Graph& g, const std::string& name,
                                  const std::vector<Blob*>& parts) {
  for (const Blob* b : parts)
    require(!b->location().is_cpu(), name, ": NCCL reduces between GPUs, but '", b->name(),
            "' is at ", b->location(), " (train on GPUs, or reduce by ring, ps or mpi)");
  return collective_per_rank(g, name, "nccl_allreduce", "NCCL", parts,
                             [](Location l) { return l; });
}

}  // namespace purine
