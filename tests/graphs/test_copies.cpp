// Copy, Distribute and Aggregate composites between CPU locations of one process: values, the
// graph's shared copies, given tops, and clear errors.
#include <catch2/catch.hpp>

#include "graphs/copies.hpp"
#include "purine/dsl.hpp"
#include "purine/runnable.hpp"

using namespace purine;
using Catch::Contains;

namespace {

const Location kHome = Location::cpu(0, 0), kSecond = Location::cpu(0, 1),
               kThird = Location::cpu(0, 2);

void set_values(Blob* b, std::vector<float> values) {
  REQUIRE(static_cast<size_t>(b->tensor().count()) == values.size());
  for (size_t i = 0; i < values.size(); ++i) b->tensor().mutable_data()[i] = values[i];
}

std::vector<float> values_of(Blob* b) {
  return {b->tensor().data(), b->tensor().data() + b->tensor().count()};
}

}  // namespace

TEST_CASE("Copy brings a blob to another location with the graph's own copy", "[copies]") {
  Graph g;
  Blob* x = g.add_blob("x", {3});
  Blob* y = (B{x} >> g.add<Copy>("to_second", kSecond)).top(0);
  REQUIRE(y->location() == kSecond);
  REQUIRE(y == g.copy_to(x, kSecond, "main"));                   // shared with the builder's copies
  REQUIRE((B{x} >> g.add<Copy>("to_home", kHome)).top(0) == x);  // already there
  // A given top gets a copy op of its own.
  Blob* given = nullptr;
  {
    Graph::Placement at(g, kThird);
    given = g.add_blob("given", {3});
  }
  B{x} >> g.add<Copy>("into_given", kThird) >> B{given};
  REQUIRE(given->writers().size() == 1);
  REQUIRE(given->writers()[0]->name() == "into_given::copy");
  set_values(x, {1, -2, 3});
  Runnable run(g);
  run.run();
  REQUIRE(values_of(y) == std::vector<float>{1, -2, 3});
  REQUIRE(values_of(given) == std::vector<float>{1, -2, 3});
}

TEST_CASE("a given top at the wrong location is refused, naming it", "[copies]") {
  Graph g;
  Blob* x = g.add_blob("x", {2});
  Blob* here = g.add_blob("here", {2});
  auto& copy = g.add<Copy>("c", kSecond);
  B{x} >> copy;
  copy.set_top({here});
  REQUIRE_THROWS_WITH(copy.top(), Contains("'here' is at rank0:cpu, not at rank0:cpu1"));
}

TEST_CASE("Distribute copies one blob to every location", "[copies]") {
  Graph g;
  Blob* w = g.add_blob("w", {2});
  const B tops =
      (B{w} >> g.add<Distribute>("w_out", std::vector<Location>{kHome, kSecond, kThird})).top();
  REQUIRE(tops.size() == 3);
  REQUIRE(tops[0] == w);
  REQUIRE(tops[1]->location() == kSecond);
  REQUIRE(tops[2]->location() == kThird);
  set_values(w, {0.5f, 7});
  Runnable run(g);
  run.run();
  for (Blob* b : tops) REQUIRE(values_of(b) == std::vector<float>{0.5f, 7});
  REQUIRE_THROWS_WITH(g.add<Distribute>("none", std::vector<Location>{}),
                      Contains("no locations to distribute to"));
}

TEST_CASE("Aggregate sums or averages blobs of several locations at one", "[copies]") {
  Graph g;
  std::vector<Blob*> parts;
  for (Location l : {kHome, kSecond, kThird}) {
    Graph::Placement at(g, l);
    parts.push_back(g.add_blob("part" + std::to_string(l.cpu_index), {2}));
  }
  Blob* sum = (B(parts) >> g.add<Aggregate>("sum", kSecond)).top(0);
  Blob* mean = (B(parts) >> g.add<Aggregate>("mean", kHome, Aggregate::Mode::kAverage)).top(0);
  REQUIRE(sum->location() == kSecond);
  REQUIRE(mean->location() == kHome);
  // Summed in bottom order: the sum op reads the parts (or their copies) as given.
  const Op* sum_op = sum->writers()[0];
  REQUIRE(sum_op->type() == "sum");
  REQUIRE(sum_op->inputs()[1] == parts[1]);
  REQUIRE(sum_op->inputs()[0]->writers()[0]->inputs()[0] == parts[0]);
  REQUIRE(sum_op->inputs()[2]->writers()[0]->inputs()[0] == parts[2]);
  set_values(parts[0], {1, 2});
  set_values(parts[1], {10, 20});
  set_values(parts[2], {100, 200});
  Runnable run(g);
  run.run();
  REQUIRE(values_of(sum) == std::vector<float>{111, 222});
  REQUIRE(values_of(mean) == std::vector<float>{37, 74});
}

TEST_CASE("Aggregate of one blob is the blob, mismatched or missing blobs are refused",
          "[copies]") {
  Graph g;
  Blob* a = g.add_blob("a", {2});
  Blob* b = g.add_blob("b", {3});
  REQUIRE((B{a} >> g.add<Aggregate>("one", kHome, Aggregate::Mode::kAverage)).top(0) == a);
  REQUIRE_THROWS_WITH(
      (B{a, b} >> g.add<Aggregate>("bad", kHome)).top(),
      Contains("'bad'") && Contains("blob 'b' has shape [3]") && Contains("'a' has [2]"));
  REQUIRE_THROWS_WITH(g.add<Aggregate>("empty", kHome).top(), Contains("nothing to aggregate"));
}
