// Every validation error names the vertex and says what was expected.
#include <catch2/catch.hpp>

#include "base/error.hpp"
#include "purine/dsl.hpp"
#include "purine/graph.hpp"

using namespace purine;
using Catch::Contains;

namespace {
Attrs filled(const Shape& shape, double value = 0) {
  Attrs a;
  a.set("shape", shape.dims()).set("value", value);
  return a;
}
}  // namespace

TEST_CASE("duplicate names are rejected at creation, naming the vertex", "[validation]") {
  Graph g("net");
  Graph::Scope scope(g, "net");
  g.add_blob("x", {2});
  REQUIRE_THROWS_WITH(g.add_blob("x", {3}), Contains("duplicate name 'net::x'"));
  REQUIRE_THROWS_WITH(g.add_op("x", "relu"), Contains("duplicate name 'net::x'"));
}

TEST_CASE("an unknown operator type lists the known ones", "[validation]") {
  Graph g;
  REQUIRE_THROWS_WITH(g.add_op("fc", "inner_prodcut"),
                      Contains("unknown operator type 'inner_prodcut'") &&
                          Contains("inner_product") && Contains("relu"));
}

TEST_CASE("a cycle is reported with the ops on it", "[validation]") {
  Graph g;
  Blob* a = g.add_blob("a", {4});
  Blob* b = g.add_blob("b", {4});
  B{a} >> g.add_op("r1", "relu") >> B{b};
  B{b} >> g.add_op("r2", "relu") >> B{a};
  REQUIRE_THROWS_WITH(g.validate(), Contains("cycle") && Contains("'r1'") && Contains("'r2'"));
}

TEST_CASE("a wrong number of inputs names the op and the missing input", "[validation]") {
  Graph g;
  Blob* x = g.add_blob("x", {2, 3});
  Blob* y = g.add_blob("y", {2, 4});
  B{x} >> g.add_op("fc", "inner_product") >> B{y};
  REQUIRE_THROWS_WITH(g.validate(), Contains("op 'fc'") && Contains("expected 2 inputs, got 1") &&
                                        Contains("not connected"));
}

TEST_CASE("a wrong output shape names the blob, expected and actual", "[validation]") {
  Graph g;
  Blob* x = g.add_blob("x", {2, 3});
  Blob* y = g.add_blob("y", {2, 4});
  B{x} >> g.add_op("act", "relu") >> B{y};
  REQUIRE_THROWS_WITH(g.validate(), Contains("op 'act'") && Contains("blob 'y'") &&
                                        Contains("[2,4]") && Contains("expected [2,3]"));
}

TEST_CASE("a wrong input shape is reported by the operator with the op's name", "[validation]") {
  Graph g;
  Blob* x = g.add_blob("x", {2, 3});
  Blob* w = g.add_blob("w", {4, 5});
  Blob* y = g.add_blob("y", {2, 4});
  B{x, w} >> g.add_op("fc", "inner_product") >> B{y};
  REQUIRE_THROWS_WITH(g.validate(), Contains("op 'fc'"));
}

TEST_CASE("reading a blob at another location without a Copy is an error", "[validation]") {
  Graph g;
  g.set_auto_copy(false);
  Blob* x = g.add_blob("x", {2});
  Blob* y;
  {
    Graph::Placement elsewhere(g, Location::cpu(1));
    y = g.add_blob("y", {2});
    B{x} >> g.add_op("act", "relu") >> B{y};
  }
  REQUIRE_THROWS_WITH(g.validate(), Contains("op 'act' at rank1:cpu reads blob 'x' at rank0:cpu") &&
                                        Contains("Copy"));
}

TEST_CASE("two writers need an accumulating blob", "[validation]") {
  Graph g;
  Blob* y = g.add_blob("y", {3});
  g.add_op("one", "fill_constant", filled({3}, 1)) >> B{y};
  g.add_op("two", "fill_constant", filled({3}, 2)) >> B{y};
  REQUIRE_THROWS_WITH(g.validate(),
                      Contains("blob 'y' is written by 2 ops") && Contains("accumulating"));
  y->set_accumulating(true);
  REQUIRE_NOTHROW(g.validate());
}

TEST_CASE("connecting an op twice is an error", "[validation]") {
  Graph g;
  Blob* x = g.add_blob("x", {2});
  Op* op = g.add_op("act", "relu");
  B{x} >> op;
  REQUIRE_THROWS_WITH(B{x} >> op, Contains("op 'act': inputs are already connected"));
}

TEST_CASE("a composite without bottoms says how to connect them", "[validation]") {
  Graph g;
  struct Identity : Composite {
    Identity(Graph& g, const std::string& n) : Composite(g, n) {}
    void setup() override {
      require_bottoms(1);
      make_top_op("relu", "relu", {}, bottom_);
    }
  };
  g.add<Identity>("layer");
  REQUIRE_THROWS_WITH(g.validate(), Contains("composite 'layer': expected 1 bottom blob, got 0"));
}
