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

TEST_CASE("sums over replicas pair the replicas' requests in order, and refuse unlike replicas",
          "[allreduce][sync_bn]") {
  // Each replica asks for sums of `asked` blobs of the given lengths (replica_sum).
  auto build = [](Graph& g, std::vector<std::vector<int64_t>> asked, std::vector<Blob*>* sums) {
    auto replica = [&](Graph& graph, int r, int) {
      Blob* w = graph.add_blob("w", {1});
      graph.add_parameter({w, "fill_constant", {}, 1.0});
      for (size_t k = 0; k < asked[r].size(); ++k) {
        Blob* partial = graph.add_blob("partial" + std::to_string(k), {asked[r][k]});
        Blob* sum = graph.replica_sum(partial);
        if (sums) sums->push_back(sum);
      }
      ReplicaOutputs out;
      out.loss = graph.apply("loss", "scale", Attrs().set("alpha", 1.0), {w})[0];
      return out;
    };
    build_data_parallel(g, {Location::cpu(0, 0), Location::cpu(0, 1)}, replica, {});
  };
  Graph g, unequal_counts, unequal_shapes;
  std::vector<Blob*> sums;
  build(g, {{3, 5}, {3, 5}}, &sums);
  REQUIRE(sums.size() == 4);
  for (Blob* sum : sums) {
    INFO(sum->name());
    REQUIRE(sum->writers().size() == 1);  // the reduced value, reshaped into the request
    CHECK(sum->writers()[0]->kernel().type() == "reshape");
  }
  CHECK(sums[2]->name() == "replica1::partial0::replica_sum");
  REQUIRE_THROWS_WITH(build(unequal_counts, {{3}, {3, 5}}, nullptr),
                      "data parallel: replica 1 asks for 2 sums over the replicas, replica 0 for "
                      "1; build the same graph in every replica");
  REQUIRE_THROWS_WITH(build(unequal_shapes, {{3, 5}, {3, 4}}, nullptr),
                      Contains("'replica1::partial1' of shape [4] is summed over the replicas "
                               "with 'replica0::partial1' of shape [5]"));
}
