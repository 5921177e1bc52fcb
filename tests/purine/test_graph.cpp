// Graph vocabulary: names, scopes, the >> DSL, composites, sources/sinks, prune, GraphViz.
#include <catch2/catch.hpp>

#include "base/error.hpp"
#include "graphs/layers.hpp"
#include "purine/dsl.hpp"
#include "purine/graph.hpp"

using namespace purine;

namespace {
// A composite that applies ReLU then tanh, creating its top unless given one.
class ReluTanh : public Composite {
 public:
  ReluTanh(Graph& g, const std::string& name) : Composite(g, name) {}

 protected:
  void setup() override {
    require_bottoms(1);
    Blob* r = make_op("relu", "relu", {}, bottom_)[0];
    make_top_op("tanh", "tanh", {}, {r});
  }
};
}  // namespace

TEST_CASE("scopes build hierarchical names", "[graph]") {
  Graph g;
  Graph::Scope net(g, "net");
  Blob* w;
  {
    Graph::Scope conv(g, "conv1");
    w = g.add_blob("weight", {3});
  }
  REQUIRE(w->name() == "net::conv1::weight");
  REQUIRE(g.blob("net::conv1::weight") == w);
  REQUIRE_THROWS_WITH(g.blob("net::conv2::weight"),
                      Catch::Contains("no blob named 'net::conv2::weight'"));
}

TEST_CASE("the >> DSL connects blobs, ops and composites", "[graph]") {
  Graph g;
  Blob* x = g.add_blob("x", {2, 3});
  Blob* y = g.add_blob("y", {2, 3});
  Op* relu = g.add_op("relu", "relu");
  B out = B{x} >> relu >> B{y};
  REQUIRE(out == B{y});
  REQUIRE(relu->inputs() == B{x});
  REQUIRE(y->writers() == std::vector<Op*>{relu});
  REQUIRE(x->readers() == std::vector<Op*>{relu});

  auto& first = g.add<ReluTanh>("block1");
  auto& second = g.add<ReluTanh>("block2");
  Composite& last = B{y} >> first >> second;
  REQUIRE(&last == &second);
  REQUIRE(second.top(0)->name() == "block2::top");
  REQUIRE(second.top(0)->shape() == Shape{2, 3});
  REQUIRE(second.bottom() == first.top());

  // Given tops are used instead of new ones.
  Blob* z = g.add_blob("z", {2, 3});
  auto& third = g.add<ReluTanh>("block3");
  B result = B{second.top(0)} >> third >> B{z};
  REQUIRE(result == B{z});
  REQUIRE(z->writers()[0]->name() == "block3::tanh");
  REQUIRE_NOTHROW(g.validate());
}

TEST_CASE("sources, sinks and prune", "[graph]") {
  Graph g;
  Blob* x = g.add_blob("x", {4});
  Blob* a = g.apply("a", "relu", {}, {x})[0];
  Blob* b = g.apply("b", "tanh", {}, {x})[0];
  Blob* c = g.apply("c", "sigmoid", {}, {a})[0];
  REQUIRE(g.sources() == B{x});
  REQUIRE(g.sinks() == B{b, c});
  const std::string pruned_blob = b->name();
  REQUIRE(g.prune({c}) == 1);  // "b" goes
  REQUIRE(g.find_op("b") == nullptr);
  REQUIRE(g.find_blob(pruned_blob) == nullptr);
  REQUIRE(g.ops().size() == 2);
  REQUIRE(x->readers().size() == 1);
  REQUIRE(g.sinks() == B{c});
}

TEST_CASE("the GraphViz dump shows every vertex and edge", "[graph]") {
  Graph g("tiny");
  Blob* x = g.add_blob("x", {4});
  g.apply("act", "relu", {}, {x}, {"y"});
  std::string dot = g.to_dot();
  REQUIRE(dot.find("digraph \"tiny\"") != std::string::npos);
  REQUIRE(dot.find("\"x\" -> \"act\"") != std::string::npos);
  REQUIRE(dot.find("\"act\" -> \"y\"") != std::string::npos);
  REQUIRE(dot.find("rank0:cpu") != std::string::npos);
}

TEST_CASE(
    "the picture draws tensors as boxes and ops as circles by role, swaps, and layers "
    "collapsed",
    "[graph]") {
  // fc1 -> relu on cpu0, fc2 on cpu1; backward of fc1's weight; an "update" swapped in.
  Graph g("pic");
  g.place("fc2", Location::cpu(0, 1));
  Blob* x = g.add_blob("x", {2, 3});
  auto& fc2 = g.add<InnerProductLayer>("fc2", InnerProductLayer::Options{2});
  B{x} >> g.add<InnerProductLayer>("fc1", InnerProductLayer::Options{4}) >>
      g.add<ActivationLayer>("relu", "relu") >> fc2;
  Blob* w = g.blob("fc1::weight");
  Blob* grad;
  {
    Graph::RoleScope backward(g, OpRole::kBackward);
    grad = g.apply("dw", "scale", {}, {w}, {"dw_out"})[0];
  }
  {
    Graph::RoleScope optimizer(g, OpRole::kOptimizer);
    g.add_swap(w, g.apply("update", "sum", {}, {w, grad}, {"new_w"})[0]);
  }
  g.validate();  // sets fc2 up
  const std::string expanded = g.to_dot();
  CHECK(expanded.find("\"fc1::weight\" [shape=box") != std::string::npos);
  CHECK(
      expanded.find("\"fc1::inner_product\" [shape=circle, style=filled, fillcolor=\"#cfe2f3\"") !=
      std::string::npos);
  CHECK(expanded.find("\"dw\" [shape=circle, style=filled, fillcolor=\"#fce5cd\"") !=
        std::string::npos);
  CHECK(expanded.find("\"update\" [shape=circle, style=filled, fillcolor=\"#d9ead3\"") !=
        std::string::npos);
  CHECK(expanded.find("fillcolor=\"#e4d7f5\", label=\"copy\"") != std::string::npos);
  CHECK(expanded.find("\"new_w\" -> \"fc1::weight\" [style=dashed, color=") != std::string::npos);
  CHECK(expanded.find("label=\"rank0:cpu1\"") != std::string::npos);  // fc2's cluster
  // Collapsed: fc1's ops are one forward circle; its weight and bias one weights box read by it.
  Graph::DotOptions collapse;
  collapse.collapse = true;
  const std::string collapsed = g.to_dot(collapse);
  CHECK(collapsed.find("\"fc1|forward|rank0:cpu\" [shape=circle") != std::string::npos);
  CHECK(collapsed.find("\"fc1::inner_product\"") == std::string::npos);
  CHECK(collapsed.find("\"weights|fc1|rank0:cpu\" -> \"fc1|forward|rank0:cpu\"") !=
        std::string::npos);
  CHECK(collapsed.find("\"fc1::top\" [shape=box") != std::string::npos);  // between layers
  auto count = [](const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(count(collapsed, "shape=circle") < count(expanded, "shape=circle"));
  Graph::DotOptions forward;
  forward.forward_only = true;
  const std::string forward_dot = g.to_dot(forward);
  CHECK(forward_dot.find("#fce5cd") == std::string::npos);
  CHECK(forward_dot.find("#d9ead3") == std::string::npos);
}

TEST_CASE("topological order is deterministic and respects edges", "[graph]") {
  Graph g;
  Blob* x = g.add_blob("x", {4});
  Blob* late = g.add_blob("late", {4});
  Op* second = g.add_op("second", "relu");
  Blob* mid = g.apply("first", "tanh", {}, {x})[0];
  B{mid} >> second >> B{late};
  auto order = g.topological_order();
  REQUIRE(order.size() == 2);
  REQUIRE(order[0]->name() == "first");
  REQUIRE(order[1]->name() == "second");
}

namespace {
// A composite with one parameter, scaling its bottom by it.
class Scaled : public Composite {
 public:
  Scaled(Graph& g, const std::string& name) : Composite(g, name) {}

 protected:
  void setup() override {
    require_bottoms(1);
    Blob* w = make_parameter("weight", bottom_[0]->shape(), "fill_constant");
    make_top_op("mul", "mul", {}, {bottom_[0], w});
  }
};
}  // namespace

TEST_CASE("parameters() sets up pending composites or refuses to miss them", "[graph]") {
  Graph g("net");
  Blob* x = g.add_blob("x", {2});
  auto& first = g.add<Scaled>("first");
  auto& last = g.add<Scaled>("last");
  B{x} >> first >> last;  // last's top not used yet: it is still pending
  REQUIRE(first.is_setup());
  REQUIRE_FALSE(last.is_setup());
  const Graph& view = g;
  REQUIRE_THROWS_WITH(view.parameters(),
                      Catch::Contains("composite 'last' is not set up yet, so its parameters "
                                      "are missing"));
  const std::vector<Parameter>& params = g.parameters();
  REQUIRE(params.size() == 2);
  CHECK(params[1].blob->name() == "last::weight");
  CHECK(view.parameters().size() == 2);
  // A composite without bottoms is not pending work and does not block the const form.
  g.add<Scaled>("unused");
  CHECK(view.parameters().size() == 2);
}

TEST_CASE("a composite added twice under one name is refused at once", "[graph]") {
  Graph g("net");
  g.add<Scaled>("fc");
  REQUIRE_THROWS_WITH(g.add<Scaled>("fc"), Catch::Contains("composite 'fc' is added twice"));
  Graph::Scope scope(g, "other");
  CHECK_NOTHROW(g.add<Scaled>("fc"));  // another scope, another name
}

TEST_CASE("a GPU tensor crosses ranks through both ranks' host memory", "[graph][gpu]") {
  Graph g("net");
  Blob* x;
  {
    Graph::Placement on(g, Location::gpu(0, 0));
    x = g.add_blob("x", {4});
  }
  Blob* there = g.copy_to(x, Location::gpu(1, 1), Graph::kMainThread);
  CHECK(there->location() == Location::gpu(1, 1));
  // Walk the copies back: gpu1@rank1 <- cpu@rank1 <- cpu@rank0 <- gpu0@rank0.
  std::vector<Location> path{there->location()};
  for (Blob* b = there; b != x;) {
    REQUIRE(b->writers().size() == 1);
    b = b->writers()[0]->inputs().at(0);
    path.push_back(b->location());
  }
  CHECK(path == std::vector<Location>{Location::gpu(1, 1), Location::cpu(1), Location::cpu(0),
                                      Location::gpu(0, 0)});
  // The hops are ordinary copies, shared with later readers.
  CHECK(g.copy_to(x, Location::gpu(1, 1), Graph::kMainThread) == there);
  CHECK(g.copy_to(x, Location::cpu(1), Graph::kMainThread) == there->writers()[0]->inputs()[0]);
}

namespace {
// Two ReluTanh inside: composites made in setup() are nested, not layers of their own.
class TwoReluTanh : public Composite {
 public:
  TwoReluTanh(Graph& g, const std::string& name) : Composite(g, name) {}

 protected:
  void setup() override {
    require_bottoms(1);
    auto& inner = graph().add<ReluTanh>("first");
    auto& outer = graph().add<ReluTanh>("second");
    B{bottom_} >> inner >> outer;
    top_ = outer.top();
  }
};
}  // namespace

TEST_CASE("place() builds the named composites at their locations, layer_names() lists blocks",
          "[graph]") {
  Graph g;
  g.place("b", Location::cpu(0, 1));
  g.place("net::c", Location::cpu(0, 2));
  g.place("t::c", Location::cpu(0, 3));  // a shorter rule than net::c: not the one chosen
  Blob* x = g.add_blob("x", {2, 3});
  Graph::Scope scope(g, "net");
  auto& a = g.add<ReluTanh>("a");
  auto& b = g.add<TwoReluTanh>("b");
  auto& c = g.add<ReluTanh>("c");
  B{x} >> a >> b >> c;
  CHECK(a.top(0)->location() == Location::cpu(0, 0));
  CHECK(b.top(0)->location() == Location::cpu(0, 1));
  CHECK(c.top(0)->location() == Location::cpu(0, 2));
  CHECK(g.op("net::b::second::tanh")->location() == Location::cpu(0, 1));  // nested: follows b
  // b reads a's top through a copy at its location.
  CHECK(g.find_blob("net::a::top@rank0:cpu1") != nullptr);
  CHECK(g.layer_names() == std::vector<std::string>{"net::a", "net::b", "net::c"});
  CHECK(g.part_names("net::b") == std::vector<std::string>{"net::b::first", "net::b::second"});
  CHECK(g.part_names("net::a").empty());  // ops alone
  CHECK(starts_scope("replica0::micro1::x", 0));
  CHECK(starts_scope("replica0::micro1::x", 10));
  CHECK_FALSE(starts_scope("replica0::micro1::x", 1));  // one character in: no scope, no throw
  CHECK_FALSE(starts_scope("replica0::micro1::x", 12));
  CHECK_THROWS_WITH(g.place("", Location::cpu()), Catch::Contains("empty composite name"));
}

TEST_CASE("a part placed apart from its layer is built there, its inputs copied to it", "[graph]") {
  Graph g;
  g.place("net::b", Location::cpu(0, 1));
  g.place("net::b::first", Location::cpu(0, 2));  // longer than net::b: the part's rule wins
  Blob* x = g.add_blob("x", {2, 3});
  Graph::Scope scope(g, "net");
  auto& b = g.add<TwoReluTanh>("b");
  B{x} >> b;
  CHECK(b.top(0)->location() == Location::cpu(0, 1));  // builds b
  CHECK(g.op("net::b::first::tanh")->location() == Location::cpu(0, 2));
  CHECK(g.op("net::b::second::tanh")->location() == Location::cpu(0, 1));
  CHECK(g.find_blob("net::b::first::top@rank0:cpu1") != nullptr);  // second reads it there
}

TEST_CASE("orders between ops are edges: a circle of waits across ranks is refused, named",
          "[graph][order]") {
  // Rank 0 computes a0 and sends it to rank 1; rank 1 computes b1 and sends it to rank 0. Each
  // rank's order makes it wait for the other's message before sending its own: run, both ranks
  // would wait forever. Every rank builds this whole graph, so the builder sees the circle.
  Graph g;
  Op *a0, *a1, *b0, *b1;
  {
    Graph::Placement at(g, Location::cpu(0));
    a0 = g.add_op("a0", "relu");
    g.set_inputs(a0, {g.add_blob("x0", {4})});
    g.set_outputs(a0, {g.add_blob("y0", {4})});
  }
  {
    Graph::Placement at(g, Location::cpu(1));
    b1 = g.add_op("b1", "relu");
    g.set_inputs(b1, {g.add_blob("x1", {4})});
    g.set_outputs(b1, {g.add_blob("y1", {4})});
    a1 = g.add_op("a1", "relu");
    g.set_inputs(a1, {g.blob("y0")});  // a copy from rank 0 is inserted
    g.set_outputs(a1, {g.add_blob("z1", {4})});
  }
  {
    Graph::Placement at(g, Location::cpu(0));
    b0 = g.add_op("b0", "relu");
    g.set_inputs(b0, {g.blob("y1")});  // a copy from rank 1
    g.set_outputs(b0, {g.add_blob("z0", {4})});
  }
  g.validate();         // without orders: fine
  g.add_order(b0, a0);  // rank 0: receive b1's value before sending a0's
  g.validate();         // one order alone waits in no circle
  g.add_order(a1, b1);  // rank 1: receive a0's value before sending b1's
  REQUIRE_THROWS_WITH(g.validate(), Catch::Contains("has a cycle: ") &&
                                        Catch::Contains("'a0' (rank0:cpu, thread main)") &&
                                        Catch::Contains("'a1' (rank1:cpu, thread main)") &&
                                        Catch::Contains("'b1' (rank1:cpu, thread main)") &&
                                        Catch::Contains("'b0' (rank0:cpu, thread main)") &&
                                        Catch::Contains("would hang"));
  CHECK_THROWS_WITH(g.add_order(a0, a1),
                    Catch::Contains("op 'a0' (rank0:cpu) and op 'a1' (rank1:cpu) are on "
                                    "different ranks; an order holds within one rank"));
}
