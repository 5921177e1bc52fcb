#include "graphs/allreduce.hpp"

#include <set>

#include "purine/base/error.hpp"

namespace purine {

namespace {

// Reductions run on their own thread per location, so they overlap the backward pass.
const char kThread[] = "comm";

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

}  // namespace

Reduction parse_reduction(const std::string& name) {
  if (name == "ring") return Reduction::kRing;
  if (name == "ps") return Reduction::kParameterServer;
  if (name == "mpi") return Reduction::kMpi;
  throw Error(str("unknown reduction '", name, "'; choose ring, ps or mpi"));
}

std::vector<Blob*> ring_allreduce(Graph& g, const std::string& name,
                                  const std::vector<Blob*>& parts) {
  check_parts(name, parts);
  const int n = static_cast<int>(parts.size());
  if (n == 1) return parts;
  Graph::Scope scope(g, name);
  const Shape shape = parts[0]->shape();
  const int64_t count = shape.count();
  // Chunk c of every part: `sizes[c]` consecutive elements. Fewer elements than ranks leaves
  // some chunks empty; they take no ops at all.
  std::vector<int64_t> sizes(n);
  std::vector<int> live;
  std::vector<int64_t> live_sizes;
  for (int c = 0; c < n; ++c) {
    sizes[c] = count / n + (c < count % n ? 1 : 0);
    if (sizes[c] > 0) {
      live.push_back(c);
      live_sizes.push_back(sizes[c]);
    }
  }
  auto at = [&](int r) { return parts[r]->location(); };
  // acc[r][c]: rank r's running sum of chunk c.
  std::vector<std::vector<Blob*>> acc(n, std::vector<Blob*>(n, nullptr));
  for (int r = 0; r < n; ++r) {
    Graph::Placement placement(g, at(r), kThread);
    const std::string local = "r" + std::to_string(r);
    Blob* flat = g.apply(local + "_flat", "reshape",
                         Attrs().set("shape", std::vector<int64_t>{count}), {parts[r]})[0];
    if (live.size() == 1) {
      acc[r][live[0]] = flat;
      continue;
    }
    Attrs split;
    split.set("axis", 0).set("sizes", live_sizes);
    std::vector<Blob*> chunks = g.apply(local + "_split", "split", split, {flat});
    for (size_t k = 0; k < live.size(); ++k) acc[r][live[k]] = chunks[k];
  }
  // Reduce-scatter: at step s rank r passes its sum of chunk r-s to rank r+1, which adds its
  // own. Afterwards rank r holds the whole sum of chunk r+1.
  for (int s = 0; s + 1 < n; ++s) {
    for (int r = 0; r < n; ++r) {
      const int c = ((r - s) % n + n) % n, next = (r + 1) % n;
      if (sizes[c] == 0) continue;
      Graph::Placement placement(g, at(next), kThread);
      Blob* incoming = g.copy_to(acc[r][c], at(next), kThread);
      acc[next][c] = g.apply("rs" + std::to_string(s) + "_c" + std::to_string(c), "sum", {},
                             {acc[next][c], incoming})[0];
    }
  }
  // All-gather: each whole chunk travels once around the ring from its owner.
  std::vector<std::vector<Blob*>> whole(n, std::vector<Blob*>(n, nullptr));
  for (int c : live) {
    int holder = ((c - 1) % n + n) % n;
    whole[holder][c] = acc[holder][c];
    for (int hop = 1; hop < n; ++hop) {
      const int next = (holder + 1) % n;
      whole[next][c] = g.copy_to(whole[holder][c], at(next), kThread);
      holder = next;
    }
  }
  std::vector<Blob*> results;
  for (int r = 0; r < n; ++r) {
    Graph::Placement placement(g, at(r), kThread);
    const std::string local = "r" + std::to_string(r);
    Blob* flat = whole[r][live[0]];
    if (live.size() > 1) {
      std::vector<Blob*> chunks;
      for (int c : live) chunks.push_back(whole[r][c]);
      flat = g.apply(local + "_concat", "concat", Attrs().set("axis", 0), chunks)[0];
    }
    results.push_back(
        g.apply(local + "_sum", "reshape", Attrs().set("shape", shape.dims()), {flat})[0]);
  }
  return results;
}

std::vector<Blob*> mpi_allreduce(Graph& g, const std::string& name,
                                 const std::vector<Blob*>& parts) {
  check_parts(name, parts);
  Graph::Scope scope(g, name);
  std::vector<Blob*> results;
  for (size_t r = 0; r < parts.size(); ++r) {
    Graph::Placement placement(g, parts[r]->location(), kThread);
    results.push_back(g.apply("r" + std::to_string(r), "mpi_allreduce", {}, {parts[r]})[0]);
  }
  return results;
}

Blob* aggregate(Graph& g, const std::string& name, const std::vector<Blob*>& parts,
                Location server) {
  check_parts(name, parts);
  Graph::Scope scope(g, name);
  Graph::Placement placement(g, server, kThread);
  std::vector<Blob*> local;
  for (Blob* b : parts) local.push_back(g.copy_to(b, server, kThread));
  if (local.size() == 1) return local[0];
  return g.apply("sum", "sum", {}, local)[0];
}

std::vector<Blob*> distribute(Graph& g, Blob* source, const std::vector<Location>& to) {
  std::vector<Blob*> copies;
  for (Location l : to) copies.push_back(g.copy_to(source, l, kThread));
  return copies;
}

}  // namespace purine
