#include "graphs/allreduce.hpp"

#include <algorithm>
#include <map>
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

// The parts whose chunks one op sums (see RingSteps): all (kDirect), each alone (kRing), or
// those of a machine (kMachines).
std::vector<int> step_groups(RingSteps steps, const std::vector<int>& machine_of_part) {
  const int n = static_cast<int>(machine_of_part.size());
  std::vector<int> groups(n);
  for (int q = 0; q < n; ++q)
    groups[q] = steps == RingSteps::kDirect ? 0
                : steps == RingSteps::kRing ? q
                                            : machine_of_part[q];
  return groups;
}

// A run of chunk c's reduce-scatter: parts consecutive in the ring's order from c, all of one
// group, whose chunks `summer` adds, in that order, to the running sum of the runs before.
struct Run {
  std::vector<int> parts;
  int summer = 0;
};

std::vector<Run> runs_of_chunk(int c, const std::vector<int>& groups) {
  const int n = static_cast<int>(groups.size());
  std::vector<Run> runs;
  for (int k = 0; k < n; ++k) {
    const int q = (c + k) % n;
    if (runs.empty() || groups[runs.back().parts.back()] != groups[q]) runs.emplace_back();
    runs.back().parts.push_back(q);
  }
  // The last run ends at the chunk's owner, c - 1, which keeps the sum. The others turn the
  // work over their parts with c, so each rank of a machine sums its share of the chunks.
  for (Run& run : runs) run.summer = run.parts[c % run.parts.size()];
  runs.back().summer = runs.back().parts.back();
  return runs;
}

// Chunk c's all-gather from its owner, as (from, to) copies in order: around the ring (kRing);
// else straight to the owner's group and to one part of every other group, which passes it on.
std::vector<std::pair<int, int>> gather_routes(int c, int owner, RingSteps steps,
                                               const std::vector<int>& groups) {
  const int n = static_cast<int>(groups.size());
  std::vector<std::pair<int, int>> routes;
  if (steps == RingSteps::kRing) {
    for (int hop = 1; hop < n; ++hop) routes.emplace_back((owner + hop - 1) % n, (owner + hop) % n);
    return routes;
  }
  std::map<int, std::vector<int>> members;  // of each group other than the owner's
  for (int hop = 1; hop < n; ++hop) {
    const int q = (owner + hop) % n;
    if (groups[q] == groups[owner])
      routes.emplace_back(owner, q);
    else
      members[groups[q]].push_back(q);
  }
  std::vector<std::pair<int, int>> passed_on;
  for (const auto& [group, parts] : members) {
    const int gateway = parts[c % parts.size()];
    routes.emplace_back(owner, gateway);
    for (int q : parts)
      if (q != gateway) passed_on.emplace_back(gateway, q);
  }
  routes.insert(routes.end(), passed_on.begin(), passed_on.end());
  return routes;
}

int distinct(const std::vector<int>& groups) {
  return static_cast<int>(std::set<int>(groups.begin(), groups.end()).size());
}

// Part q's machine under options.machine_of_rank (kMachines only).
std::vector<int> machines_of_parts(const std::string& name, const std::vector<Location>& locations,
                                   const RingOptions& options) {
  std::vector<int> machines(locations.size(), 0);
  if (options.steps != RingSteps::kMachines) return machines;
  const std::vector<int>& of = options.machine_of_rank;
  for (size_t q = 0; q < locations.size(); ++q) {
    const int rank = locations[q].rank;
    require(rank < static_cast<int>(of.size()), name,
            ": machine steps need the machine of every rank, but none is given for rank ", rank,
            " (", of.size(), " given)");
    machines[q] = of[rank];
  }
  return machines;
}

// The reduce-scatter: fills `shards` and returns, per rank, the segments of the chunk it owns
// (empty where that chunk is).
std::vector<std::vector<Blob*>> reduce_scatter(Graph& g, const std::string& name,
                                               const std::vector<Blob*>& parts,
                                               const RingOptions& options, RingShards& shards) {
  const int n = static_cast<int>(parts.size());
  shards.shape = parts[0]->shape();
  for (Blob* b : parts) shards.locations.push_back(b->location());
  shards.sizes = ring_chunk_sizes(shards.shape.count(), n);
  shards.steps = options.steps;
  shards.groups = step_groups(options.steps, machines_of_parts(name, shards.locations, options));
  const int groups = distinct(shards.groups);
  const int64_t segment_bytes = groups == 1                 ? 0
                                : options.segment_bytes < 0 ? ring_segment_bytes(groups)
                                                            : options.segment_bytes;
  for (int64_t size : shards.sizes) shards.segments.push_back(segment_sizes(size, segment_bytes));
  auto at = [&](int r) { return parts[r]->location(); };
  // mine[q][c]: the segments of part q's chunk c, at part q.
  std::vector<std::vector<std::vector<Blob*>>> mine(n, std::vector<std::vector<Blob*>>(n));
  for (int q = 0; q < n; ++q) {
    Graph::Placement placement(g, at(q), Graph::kCommThread);
    const std::string local = "r" + std::to_string(q);
    const std::vector<Blob*> chunks = flat_chunks(g, local, parts[q], shards);
    for (int c = 0; c < n; ++c)
      if (chunks[c])
        mine[q][c] =
            split_segments(g, local + "_c" + std::to_string(c), chunks[c], shards.segments[c]);
  }
  std::vector<std::vector<Run>> runs;
  for (int c = 0; c < n; ++c) runs.push_back(runs_of_chunk(c, shards.groups));
  // sum[c]: the running sum of chunk c's segments after the runs built so far. Run by run over
  // all chunks (by owner), so each rank's ops follow the order the data arrives in.
  std::vector<std::vector<Blob*>> sum(n);
  for (size_t j = 0;; ++j) {
    bool any = false;
    for (int owner = 0; owner < n; ++owner) {
      const int c = shards.chunk_of(owner);
      if (shards.sizes[c] == 0 || j >= runs[c].size()) continue;
      any = true;
      const Run& run = runs[c][j];
      const Location here = at(run.summer);
      Graph::Placement placement(g, here, Graph::kCommThread);
      const size_t segments = shards.segments[c].size();
      sum[c].resize(segments);
      for (size_t k = 0; k < segments; ++k) {
        std::vector<Blob*> terms;
        if (j > 0) terms.push_back(g.copy_to(sum[c][k], here, Graph::kCommThread));
        for (int q : run.parts)
          terms.push_back(q == run.summer ? mine[q][c][k]
                                          : g.copy_to(mine[q][c][k], here, Graph::kCommThread));
        const std::string op = step_name("rs", static_cast<int>(j), c, k, segments);
        sum[c][k] = terms.size() == 1 ? terms[0] : g.apply(op, "sum", {}, terms)[0];
      }
    }
    if (!any) break;
  }
  std::vector<std::vector<Blob*>> owned;
  for (int r = 0; r < n; ++r) owned.push_back(sum[shards.chunk_of(r)]);
  return owned;
}

// The all-gather of `owned` (per rank, the segments of its chunk): the whole at every location.
std::vector<Blob*> all_gather(Graph& g, const RingShards& shards,
                              const std::vector<std::vector<Blob*>>& owned) {
  const int n = static_cast<int>(shards.locations.size());
  // whole[q][c]: the segments of chunk c's sum at part q.
  std::vector<std::vector<std::vector<Blob*>>> whole(n, std::vector<std::vector<Blob*>>(n));
  // host[q][c]: where part q is a GPU that received chunk c's sum from another rank, the
  // segments in its rank's host memory on their way in (copy_to's hop), which it passes on to
  // other ranks instead of copying them back up from the GPU.
  std::vector<std::vector<std::vector<Blob*>>> host(n, std::vector<std::vector<Blob*>>(n));
  const std::vector<Location>& at = shards.locations;
  for (int owner = 0; owner < n; ++owner) {
    const int c = shards.chunk_of(owner);
    whole[owner][c] = owned[owner];
    for (const auto& [from, to] : gather_routes(c, owner, shards.steps, shards.groups)) {
      const bool across = at[from].rank != at[to].rank;
      for (size_t k = 0; k < owned[owner].size(); ++k) {
        Blob* source = across && !host[from][c].empty() ? host[from][c][k] : whole[from][c][k];
        whole[to][c].push_back(g.copy_to(source, at[to], Graph::kCommThread));
        if (across && !at[to].is_cpu())
          host[to][c].push_back(g.copy_to(source, Location::cpu(at[to].rank), Graph::kCommThread));
      }
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
  const std::vector<std::vector<Blob*>> owned = reduce_scatter(g, name, parts, options, shards);
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
  return all_gather(g, shards, reduce_scatter(g, name, parts, options, shards));
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

std::vector<std::pair<int, int>> ring_messages(RingSteps steps,
                                               const std::vector<int>& machine_of_part) {
  const int n = static_cast<int>(machine_of_part.size());
  const std::vector<int> groups = step_groups(steps, machine_of_part);
  std::vector<std::pair<int, int>> messages;
  for (int c = 0; c < n; ++c) {
    const std::vector<Run> runs = runs_of_chunk(c, groups);
    for (size_t j = 0; j < runs.size(); ++j) {
      if (j > 0) messages.emplace_back(runs[j - 1].summer, runs[j].summer);
      for (int q : runs[j].parts)
        if (q != runs[j].summer) messages.emplace_back(q, runs[j].summer);
    }
  }
  for (int owner = 0; owner < n; ++owner) {
    const std::vector<std::pair<int, int>> routes =
        gather_routes((owner + 1) % n, owner, steps, groups);
    messages.insert(messages.end(), routes.begin(), routes.end());
  }
  return messages;
}

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
