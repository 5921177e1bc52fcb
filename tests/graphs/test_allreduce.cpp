// Reductions that need no MPI world to check: the native allreduce refuses two blobs of one rank
// (it joins ranks, not locations), and so does the data-parallel template built on it. The
// multi-rank sums themselves are checked in tests/mpi/test_allreduce.cpp.
#include <catch2/catch.hpp>

#include "graphs/allreduce.hpp"
#include "graphs/data_parallel.hpp"

using namespace purine;
using Catch::Contains;

namespace {
Blob* blob_at(Graph& g, const std::string& name, Location at) {
  Graph::Placement placement(g, at);
  return g.add_blob(name, {4});
}
}  // namespace

TEST_CASE("mpi_allreduce refuses two blobs on one rank", "[allreduce]") {
  Graph g;
  Blob* a = blob_at(g, "a", Location::cpu(0, 0));
  Blob* b = blob_at(g, "b", Location::cpu(0, 1));
  REQUIRE_THROWS_WITH(mpi_allreduce(g, "grad", {a, b}),
                      Contains("grad: two blobs on rank 0 (one at rank0:cpu1)") &&
                          Contains("reduce within a rank by ring or ps"));
}

TEST_CASE("data parallel with the mpi reduction refuses two locations on one rank", "[allreduce]") {
  Graph g;
  DataParallelOptions options;
  options.reduction = Reduction::kMpi;
  auto replica = [](Graph& graph, int, int) {
    Blob* w = graph.add_blob("w", {1});
    graph.add_parameter({w, "fill_constant", {}, 1.0});
    ReplicaOutputs out;
    out.loss = graph.apply("loss", "scale", Attrs().set("alpha", 1.0), {w})[0];
    return out;
  };
  REQUIRE_THROWS_WITH(
      build_data_parallel(g, {Location::cpu(0, 0), Location::cpu(0, 1)}, replica, options),
      Contains("two blobs on rank 0"));
}
