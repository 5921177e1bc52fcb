// Memory sharing decided before a graph runs (purine/internal/views.hpp); the zero-copy split,
// reshape and concat cases run end to end in test_runnable.cpp.
#include <catch2/catch.hpp>

#include "purine/graph.hpp"
#include "purine/internal/memory_plan.hpp"
#include "purine/internal/views.hpp"

using namespace purine;

TEST_CASE("a sum that alone reads a received buffer writes over it", "[views]") {
  Graph g;
  Blob* remote_a;
  Blob* remote_b;
  {
    Graph::Placement there(g, Location::cpu(0));
    remote_a = g.add_blob("remote_a", {8});
    remote_b = g.add_blob("remote_b", {8});
  }
  Graph::Placement here(g, Location::cpu(1));
  Blob* local = g.add_blob("local", {8});
  Blob* received_a = g.copy_to(remote_a, Location::cpu(1), "main");
  Blob* sum_a = g.apply("sum_a", "sum", {}, {local, received_a})[0];
  // Read twice: the second reader still needs the received values after the sum.
  Blob* received_b = g.copy_to(remote_b, Location::cpu(1), "main");
  Blob* sum_b = g.apply("sum_b", "sum", {}, {local, received_b})[0];
  Blob* scaled_b = g.apply("scale_b", "scale", Attrs().set("alpha", 2.0), {received_b})[0];
  // A sum of local blobs only keeps separate memory too.
  Blob* sum_local = g.apply("sum_local", "sum", {}, {local, scaled_b})[0];

  const std::set<const Op*> idle = alias_views(g, 1);
  plan_memory(g, 1, /*reuse=*/false, {});  // memory for the views' roots
  CHECK(idle.empty());                     // the sums still compute, in place
  CHECK(sum_a->tensor().data() == received_a->tensor().data());
  CHECK(sum_b->tensor().data() != received_b->tensor().data());
  CHECK(sum_local->tensor().data() != scaled_b->tensor().data());
  CHECK(sum_local->tensor().data() != local->tensor().data());
}

TEST_CASE("a buffer copied from another CPU location of this rank is summed over too", "[views]") {
  Graph g;
  Blob* other;
  {
    Graph::Placement there(g, Location::cpu(0, 1));
    other = g.add_blob("other", {8});
  }
  Graph::Placement here(g, Location::cpu(0, 0));
  Blob* local = g.add_blob("local", {8});
  Blob* copied = g.copy_to(other, Location::cpu(0, 0), "main");
  Blob* sum = g.apply("sum", "sum", {}, {local, copied})[0];
  // A sum of a blob the op's own location wrote keeps separate memory.
  Blob* doubled = g.apply("double", "scale", Attrs().set("alpha", 2.0), {local})[0];
  Blob* sum_local = g.apply("sum_local", "sum", {}, {local, doubled})[0];

  CHECK(alias_views(g, 0).empty());
  plan_memory(g, 0, /*reuse=*/false, {});
  CHECK(sum->tensor().data() == copied->tensor().data());
  CHECK(sum_local->tensor().data() != doubled->tensor().data());
}
