// Cutting a model into pipeline stages (graphs/pipeline.hpp).
#include <catch2/catch.hpp>

#include "graphs/layers.hpp"
#include "graphs/pipeline.hpp"
#include "purine/dsl.hpp"

using namespace purine;

namespace {
std::vector<ModelLayer> layers_of(const std::vector<int64_t>& parameters) {
  std::vector<ModelLayer> layers;
  for (size_t i = 0; i < parameters.size(); ++i)
    layers.push_back({"l" + std::to_string(i), parameters[i]});
  return layers;
}
}  // namespace

TEST_CASE("stages are cut evenly by layers with parameters; the others follow the one before",
          "[pipeline]") {
  // conv, relu, pool, conv, relu, fc, fc
  const auto layers = layers_of({10, 0, 0, 10, 0, 5, 5});
  CHECK(assign_stages(layers, 1, "m") == std::vector<int>{0, 0, 0, 0, 0, 0, 0});
  CHECK(assign_stages(layers, 2, "m") == std::vector<int>{0, 0, 0, 0, 0, 1, 1});
  CHECK(assign_stages(layers, 4, "m") == std::vector<int>{0, 0, 0, 1, 1, 2, 3});
  // A parameter-free layer before the first parametric one stays in stage 0.
  CHECK(assign_stages(layers_of({0, 3, 0, 3}), 2, "m") == std::vector<int>{0, 0, 0, 1});
  CHECK_THROWS_WITH(assign_stages(layers, 5, "m"),
                    Catch::Contains("pipeline of model 'm': 5 stages, but it has 4 layers with "
                                    "parameters (l0, l3, l5, l6); use at most 4"));
  CHECK_THROWS_WITH(assign_stages(layers, 0, "m"), Catch::Contains("at least 1, got 0"));
}

TEST_CASE(
    "model_layers lists a model's blocks with their parameter counts; place_stages "
    "builds them at their stages",
    "[pipeline]") {
  auto build = [](Graph& g) {
    Graph::Scope scope(g, "net");
    B{g.add_blob("x", {2, 3})} >> g.add<InnerProductLayer>("fc1", InnerProductLayer::Options{4}) >>
        g.add<ActivationLayer>("relu", "relu") >>
        g.add<InnerProductLayer>("fc2", InnerProductLayer::Options{2});
  };
  const std::vector<ModelLayer> layers = model_layers(build);
  REQUIRE(layers.size() == 3);
  CHECK(layers[0].name == "net::fc1");
  CHECK(layers[0].parameters == 4 * 3 + 4);
  CHECK(layers[1].parameters == 0);
  CHECK(layers[2].parameters == 2 * 4 + 2);
  Graph g;
  {
    Graph::Scope replica(g, "replica0");  // placement rules match any enclosing scope
    place_stages(g, layers, assign_stages(layers, 2, "net"),
                 {Location::cpu(0, 0), Location::cpu(0, 1)});
    build(g);
  }
  g.validate();
  CHECK(g.blob("replica0::net::fc1::weight")->location() == Location::cpu(0, 0));
  CHECK(g.blob("replica0::net::relu::top")->location() == Location::cpu(0, 0));
  CHECK(g.blob("replica0::net::fc2::weight")->location() == Location::cpu(0, 1));
  CHECK_THROWS_WITH(place_stages(g, layers, {0, 0, 2}, {Location::cpu(0, 0), Location::cpu(0, 1)}),
                    Catch::Contains("layer 'net::fc2' is in stage 2 of 2"));
}
