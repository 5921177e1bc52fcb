// The compile step without threads or MPI: each rank's part of a graph, the two halves of a
// cross-rank copy with one tag, executors, zero-copy views, generators and ordered collectives.
#include <catch2/catch.hpp>

#include "purine/compile.hpp"

using namespace purine;
using Catch::Contains;

namespace {

const dispatch::Task& task_of(const CompiledGraph& c, const Op* op) {
  return c.plan.tasks().at(c.tasks.at(op));
}

bool depends_on(const CompiledGraph& c, const Op* before, const Op* after) {
  const auto& next = c.plan.successors().at(c.tasks.at(before));
  return std::find(next.begin(), next.end(), c.tasks.at(after)) != next.end();
}

// x at rank 0, copied to rank 1 and scaled there.
struct TwoRanks {
  Graph g;
  Blob* x;
  Op* copy;
  Op* scale;
  TwoRanks() {
    x = g.add_blob("x", {3});
    Blob* there = g.copy_to(x, Location::cpu(1), "main");
    copy = there->writers().at(0);
    Graph::Placement at(g, Location::cpu(1));
    scale = g.apply("scale", "scale", Attrs().set("alpha", 2.0), {there})[0]->writers().at(0);
  }
};

}  // namespace

TEST_CASE("each rank compiles its own ops and its half of a cross-rank copy", "[compile]") {
  TwoRanks t;
  CompileOptions options;
  options.rank = 0;
  const CompiledGraph rank0 = compile(t.g, options);
  options.rank = 1;
  const CompiledGraph rank1 = compile(t.g, options);

  REQUIRE(rank0.tasks.size() == 1);  // the send half only
  REQUIRE(rank0.links.at(t.copy).side == PeerLink::kSend);
  REQUIRE(rank0.links.at(t.copy).peer == 1);
  REQUIRE_THAT(task_of(rank0, t.copy).name, Contains("(send to rank 1)"));
  REQUIRE(task_of(rank0, t.copy).location == "rank0:cpu");  // at the blob it sends
  REQUIRE(task_of(rank0, t.copy).poll);                     // asynchronous
  REQUIRE(task_of(rank0, t.copy).run_first);                // the peer waits for it

  REQUIRE(rank1.tasks.size() == 2);
  REQUIRE(rank1.links.at(t.copy).side == PeerLink::kReceive);
  REQUIRE(rank1.links.at(t.copy).peer == 0);
  REQUIRE(rank1.links.at(t.copy).tag == rank0.links.at(t.copy).tag);
  REQUIRE_THAT(task_of(rank1, t.copy).name, Contains("(receive from rank 0)"));
  REQUIRE(depends_on(rank1, t.copy, t.scale));
  REQUIRE_FALSE(task_of(rank1, t.copy).run_first);
  REQUIRE_FALSE(task_of(rank1, t.scale).poll);  // synchronous
}

TEST_CASE("without MPI_THREAD_MULTIPLE communication runs on the rank's mpi executor",
          "[compile]") {
  TwoRanks t;
  CompileOptions options;
  const CompiledGraph own_thread = compile(t.g, options);
  REQUIRE(own_thread.plan.executors().at(task_of(own_thread, t.copy).executor).name ==
          "rank0:cpu/main");
  options.single_mpi_thread = true;
  const CompiledGraph mpi = compile(t.g, options);
  const auto& executor = mpi.plan.executors().at(task_of(mpi, t.copy).executor);
  REQUIRE(executor.name == "rank0:cpu/mpi");
  REQUIRE(executor.kind == dispatch::ExecutorKind::kMpi);
}

TEST_CASE("more copies between two ranks than MPI tags is an error", "[compile]") {
  TwoRanks t;
  t.g.copy_to(t.g.add_blob("y", {2}), Location::cpu(1), "main");
  CompileOptions options;
  options.tag_upper_bound = 1;
  REQUIRE_THROWS_WITH(compile(t.g, options),
                      Contains("more than 1 copies from rank 0 to rank 1, the MPI tags available"));
}

TEST_CASE("a contiguous split compiles to views and a task that computes nothing", "[compile]") {
  Graph g;
  Blob* x = g.add_blob("x", {4, 3});
  auto parts = g.apply("split", "split",
                       Attrs().set("axis", 0).set("sizes", std::vector<int64_t>{1, 3}), {x});
  auto other = g.apply("split_cols", "split",
                       Attrs().set("axis", 1).set("sizes", std::vector<int64_t>{1, 2}), {x});
  const CompiledGraph c = compile(g, {});
  REQUIRE_FALSE(task_of(c, parts[0]->writers()[0]).run);
  REQUIRE(parts[0]->tensor().data() == x->tensor().data());
  REQUIRE(parts[1]->tensor().data() == x->tensor().data() + 3);
  // Columns are not contiguous slices: that split copies.
  REQUIRE(task_of(c, other[0]->writers()[0]).run);
  REQUIRE(other[1]->tensor().data() != x->tensor().data() + 1);
}

TEST_CASE("random ops share their location's generator, collectives are ordered", "[compile]") {
  Graph g;
  std::vector<const Op*> random;
  for (int k : {0, 0, 1}) {
    Graph::Placement at(g, Location::cpu(0, k));
    Blob* x = g.add_blob("x" + std::to_string(random.size()), {8});
    random.push_back(
        g.apply("drop" + std::to_string(random.size()), "dropout", {}, {x})[0]->writers()[0]);
  }
  Blob* a = g.apply("sum_a", "mpi_allreduce", {}, {g.add_blob("ga", {2})})[0];
  Blob* b = g.apply("sum_b", "mpi_allreduce", {}, {g.add_blob("gb", {2})})[0];
  const CompiledGraph c = compile(g, {});
  REQUIRE(c.generators.size() == 2);  // cpu0 and cpu1
  std::map<std::string, std::vector<dispatch::TaskId>> users;
  for (size_t r = 0; r < c.plan.resources().size(); ++r)
    users[c.plan.resources()[r]] = c.plan.resource_users()[r];
  REQUIRE(users.at("rng@rank0:cpu").size() == 2);
  REQUIRE(users.at("rng@rank0:cpu1").size() == 1);
  REQUIRE(users.at("mpi:collectives") ==
          std::vector<dispatch::TaskId>{c.tasks.at(a->writers()[0]), c.tasks.at(b->writers()[0])});
  REQUIRE(task_of(c, a->writers()[0]).poll);  // started asynchronously, then polled
}
