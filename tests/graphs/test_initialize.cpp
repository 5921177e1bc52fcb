// Initialization by name: a tensor's values depend only on the seed and its single-device name,
// so any parallel layout starts from the weights of the one-location graph.
#include <catch2/catch.hpp>

#include "graphs/data_parallel.hpp"
#include "graphs/initialize.hpp"
#include "graphs/layers.hpp"
#include "purine/dsl.hpp"

using namespace purine;
using Catch::Contains;

namespace {

std::vector<float> values_of(Blob* b) {
  return {b->tensor().data(), b->tensor().data() + b->tensor().count()};
}

// A two-layer model; `extra_first` registers one more random parameter before it.
ReplicaOutputs two_layers(Graph& g, bool extra_first = false) {
  if (extra_first)
    g.add_parameter({g.add_blob("extra", {10}), "fill_gaussian",
                     Attrs().set("shape", std::vector<int64_t>{10})});
  Blob* x = g.add_blob("x", {4, 6});
  Blob* labels = g.add_blob("labels", {4});
  auto& fc1 = g.add<InnerProductLayer>("fc1", InnerProductLayer::Options{5});
  auto& fc2 = g.add<InnerProductLayer>("fc2", InnerProductLayer::Options{3});
  auto& loss = g.add<SoftmaxLossLayer>("loss");
  B{x} >> fc1 >> fc2;
  B{fc2.top(0), labels} >> loss;
  return {loss.top(0), nullptr};
}

}  // namespace

TEST_CASE("a parameter's initial values depend on the seed and its name only", "[initialize]") {
  Graph a, b;
  {
    Graph::Scope s(a, "net");
    two_layers(a);
  }
  {
    Graph::Scope s(b, "net");
    two_layers(b, /*extra_first=*/true);
  }
  initialize_parameters(a, 7);
  initialize_parameters(b, 7);
  for (const char* name : {"net::fc1::weight", "net::fc2::weight", "net::fc2::bias"}) {
    INFO(name);
    REQUIRE(values_of(a.blob(name)) == values_of(b.blob(name)));
  }
  initialize_parameters(b, 8);  // another seed, other values
  REQUIRE(values_of(b.blob("net::fc1::weight")) != values_of(a.blob("net::fc1::weight")));
}

TEST_CASE("replicas on any locations and ranks start from the one-location weights",
          "[initialize]") {
  Graph single;
  two_layers(single);
  initialize_parameters(single, 3);

  // Two locations of rank 0 and one of rank 1; this process fills each rank in turn.
  Graph g;
  const std::vector<Location> locations{Location::cpu(0, 0), Location::cpu(0, 1),
                                        Location::cpu(1, 0)};
  DataParallelGraph dp =
      build_data_parallel(g, locations, [](Graph& r, int, int) { return two_layers(r); }, {});
  initialize_parameters(dp.checkpoint, g, 3, /*rank=*/0);
  for (const Parameter& p : dp.parameters[2]) {  // rank 1's replica: untouched so far
    const auto v = values_of(p.blob);
    REQUIRE(std::all_of(v.begin(), v.end(), [](float x) { return x == 0; }));
  }
  initialize_parameters(dp.checkpoint, g, 3, /*rank=*/1);
  for (size_t r = 0; r < locations.size(); ++r)
    for (const Parameter& p : dp.parameters[r]) {
      const std::string name = p.blob->name().substr(p.blob->name().find("::") + 2);
      INFO(p.blob->name());
      REQUIRE(values_of(p.blob) == values_of(single.blob(name)));
    }
}

TEST_CASE("a tensor split into pieces gets the slices of the whole tensor", "[initialize]") {
  // The whole [4, 3] Xavier-filled tensor, and the same tensor held as two [2, 3] halves.
  Graph whole;
  Blob* w = whole.add_blob("w", {4, 3});
  whole.add_parameter({w, "fill_xavier", Attrs().set("shape", std::vector<int64_t>{4, 3})});
  initialize_parameters(whole, 11);

  Graph split;
  Blob* top = split.add_blob("top", {2, 3});
  Blob* bottom = split.add_blob("bottom", {2, 3});
  for (Blob* half : {top, bottom})
    split.add_parameter({half, "fill_xavier", Attrs().set("shape", std::vector<int64_t>{2, 3})});
  StoredTensor stored;
  stored.name = "w";
  stored.shape = {4, 3};
  stored.saved_from = stored.loaded_into = {{top, 0}, {bottom, 6}};
  initialize_parameters({stored}, split, 11);

  // Same stream, and the fans of the whole [4, 3] shape, not of a half.
  const auto all = values_of(w);
  REQUIRE(values_of(top) == std::vector<float>(all.begin(), all.begin() + 6));
  REQUIRE(values_of(bottom) == std::vector<float>(all.begin() + 6, all.end()));
}

TEST_CASE("a map naming no parameter of the graph is refused", "[initialize]") {
  Graph g;
  Blob* loose = g.add_blob("loose", {2});
  StoredTensor stored;
  stored.name = "loose";
  stored.shape = {2};
  stored.saved_from = stored.loaded_into = {{loose, 0}};
  REQUIRE_THROWS_WITH(initialize_parameters({stored}, g, 1),
                      Contains("no piece of tensor 'loose' is a parameter or state of graph"));
}
