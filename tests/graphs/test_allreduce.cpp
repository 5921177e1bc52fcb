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

TEST_CASE("collectives of GPU parts: NCCL on the GPUs, MPI through host memory", "[allreduce]") {
  Graph g;
  Blob* a = blob_at(g, "a", Location::gpu(0, 0));
  Blob* b = blob_at(g, "b", Location::gpu(1, 1));
  const std::vector<Blob*> nccl = nccl_allreduce(g, "grad", {a, b});
  REQUIRE(nccl.size() == 2);
  CHECK(nccl[0]->location() == Location::gpu(0, 0));
  CHECK(nccl[1]->location() == Location::gpu(1, 1));
  CHECK(nccl[1]->writers()[0]->kernel().type() == "nccl_allreduce");
  CHECK(nccl[1]->writers()[0]->thread() == Graph::kCommThread);
  // MPI reduces on each rank's CPU; the builder copies the GPU gradient there.
  const std::vector<Blob*> mpi = mpi_allreduce(g, "grad_mpi", {a, b});
  CHECK(mpi[1]->location() == Location::cpu(1));
  CHECK(mpi[1]->writers()[0]->inputs()[0]->location() == Location::cpu(1));
  // NCCL joins GPUs only, one per rank.
  REQUIRE_THROWS_WITH(nccl_allreduce(g, "cpu", {blob_at(g, "c", Location::cpu(0))}),
                      Contains("NCCL reduces between GPUs, but 'c' is at rank0:cpu"));
  REQUIRE_THROWS_WITH(
      nccl_allreduce(g, "two", {a, blob_at(g, "d", Location::gpu(1, 0))}),
      Contains("two: two blobs on rank 0") && Contains("NCCL joins one blob per rank"));
}
