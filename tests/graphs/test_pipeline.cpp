// Cutting a model into pipeline stages (graphs/pipeline.hpp).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "base/error.hpp"
#include "graphs/layers.hpp"
#include "graphs/pipeline.hpp"
#include "purine/autodiff.hpp"
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

TEST_CASE(
    "without costs, stages are cut evenly by layers with parameters, the others follow the "
    "one before",
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

TEST_CASE("with costs, stages are cut so that the most costly stage costs least", "[pipeline]") {
  // conv (costly), relu, conv, relu, fc, fc: by count {conv, relu, conv, relu | fc, fc}.
  std::vector<ModelLayer> layers = {{"c1", 10, 90}, {"r1", 0, 4},  {"c2", 10, 30},
                                    {"r2", 0, 2},   {"f1", 5, 20}, {"f2", 5, 10}};
  CHECK(assign_stages(layers, 2, "m") == std::vector<int>{0, 0, 1, 1, 1, 1});  // 94 | 62
  CHECK(assign_stages(layers, 3, "m") == std::vector<int>{0, 0, 1, 1, 2, 2});  // 94 | 32 | 30
  CHECK(assign_stages(layers, 4, "m") == std::vector<int>{0, 0, 1, 1, 2, 3});
  // The costliest unit last: the others share the first stages.
  layers = {{"f1", 1, 1}, {"f2", 1, 1}, {"f3", 1, 1}, {"f4", 1, 50}};
  CHECK(assign_stages(layers, 2, "m") == std::vector<int>{0, 0, 0, 1});
  CHECK(assign_stages(layers, 3, "m") == std::vector<int>{0, 0, 1, 2});
}

TEST_CASE("a cut falls between the parts of a layer where whole layers balance the stages worse",
          "[pipeline]") {
  std::vector<ModelLayer> layers = {
      {"a", 10, 50},
      {"b", 30, 60, {{"b::p", 10, 20}, {"b::q", 10, 20}, {"b::r", 10, 20}}},
      {"c", 10, 50}};
  auto names = [](const std::vector<ModelLayer>& units) {
    std::vector<std::string> out;
    for (const ModelLayer& u : units) out.push_back(u.name);
    return out;
  };
  CHECK(names(stage_units(layers, StageCut::kLayers)) == std::vector<std::string>{"a", "b", "c"});
  // The layer itself follows its last part, with nothing left of its own.
  std::vector<ModelLayer> units = stage_units(layers);
  REQUIRE(names(units) == std::vector<std::string>{"a", "b::p", "b::q", "b::r", "b", "c"});
  CHECK(units[4].parameters == 0);
  CHECK(units[4].cost == 0);
  // 2 stages: whole layers 110 | 50 at best, parts 90 | 70.
  CHECK(assign_stages(stage_units(layers, StageCut::kLayers), 2, "m") == std::vector<int>{0, 0, 1});
  CHECK(assign_stages(units, 2, "m") == std::vector<int>{0, 0, 0, 1, 1, 1});
  // 3 stages: 50 | 60 | 50, the module whole.
  CHECK(assign_stages(units, 3, "m") == std::vector<int>{0, 1, 1, 1, 1, 2});
  // More stages than whole layers with parameters: parts give enough.
  CHECK(assign_stages(units, 4, "m") == std::vector<int>{0, 1, 1, 2, 2, 3});
  // Each stage pays for what crosses its cuts, both ways (2 * kFlopsPerByte * kLinkSlowdown a
  // byte): with 40 to pay on each side of a cut inside the module, 130 | 110 at best, the cut
  // goes to the module's end, 110 | 50.
  const double inside = 40 / (2 * kFlopsPerByte * kLinkSlowdown);
  layers[1].parts[0].bytes_after = layers[1].parts[1].bytes_after = inside;
  CHECK(assign_stages(stage_units(layers), 2, "m") == std::vector<int>{0, 0, 0, 0, 0, 1});
  // A copy between CPU locations of one process is a memcpy; to a GPU or another rank it
  // crosses a link.
  CHECK(stage_link_slowdown({Location::cpu(0, 0), Location::cpu(0, 1)}) == 1);
  CHECK(stage_link_slowdown({Location::gpu(0, 0), Location::gpu(1, 0)}) == kLinkSlowdown);
  CHECK(stage_link_slowdown({Location::cpu(0), Location::cpu(1)}) == kLinkSlowdown);
  // A layer's own parameters stay with it.
  layers[1].parameters += 7;
  CHECK(stage_units(layers)[4].parameters == 7);
}

TEST_CASE("measured times replace the estimates of the layers and parts they name", "[pipeline]") {
  std::vector<ModelLayer> layers = {
      {"m::a", 1, 10}, {"m::b", 2, 10, {{"m::b::p", 1, 5}, {"m::b::q", 1, 5}}}, {"m::c", 1, 4}};
  const std::map<std::string, double> seconds = {
      {"replica0::micro0::m::a::conv", 2},  // scopes of its own before the model's
      {"m::a::conv::grad::op0", 1},
      {"replica0::m::b::p::conv", 1},
      {"m::b::q::conv", 2},
      {"m::ab::conv", 100},  // another layer, whose name only starts like m::a
      {"xm::a::conv", 100},  // not at a scope's start
      {"data", 100}};        // no layer's
  CHECK(measure_layers(layers, seconds) == 2);
  // a traced 3 s and b 3 s against estimates of 10 each: 20 / 6 in the estimates' units a second.
  CHECK(layers[0].cost == Approx(10));
  CHECK(layers[1].cost == Approx(10));
  CHECK(layers[1].parts[0].cost == Approx(10.0 / 3));
  CHECK(layers[1].parts[1].cost == Approx(20.0 / 3));
  CHECK(layers[2].cost == 4);  // untraced: its estimate
  std::vector<ModelLayer> untouched = layers;
  CHECK(measure_layers(untouched, {{"data", 1}}) == 0);
  CHECK(untouched[0].cost == layers[0].cost);
}

TEST_CASE("model_layers lists the parts of a layer built of layers, with their costs",
          "[pipeline]") {
  auto build = [](Graph& g) {
    B{g.add_blob("x", {4, 8, 6, 6})} >> g.add<ConvLayer>("conv", ConvLayer::Options{8, 1}) >>
        g.add<InceptionLayer>("inception", InceptionLayer::Options{4, 4, 8, 2, 4, 4});
  };
  const std::vector<ModelLayer> layers = model_layers(build);
  REQUIRE(layers.size() == 2);
  CHECK(layers[0].parts.empty());
  std::vector<std::string> parts;
  int64_t parameters = 0;
  double cost = 0;
  for (const ModelLayer& part : layers[1].parts) {
    parts.push_back(part.name.substr(std::string("inception::").size()));
    parameters += part.parameters;
    cost += part.cost;
  }
  CHECK(parts == std::vector<std::string>{"1x1", "1x1_relu", "3x3_reduce", "3x3_reduce_relu", "3x3",
                                          "3x3_relu", "5x5_reduce", "5x5_reduce_relu", "5x5",
                                          "5x5_relu", "pool", "pool_proj", "pool_proj_relu",
                                          "concat"});
  // The module is all parts: they hold its parameters and its work.
  CHECK(parameters == layers[1].parameters);
  CHECK(cost == Approx(layers[1].cost));
  CHECK(layers[1].parts[4].cost > layers[1].parts[0].cost);  // the 3x3 against the 1x1
}

TEST_CASE("model_layers costs each layer by its forward ops", "[pipeline]") {
  // fc1 does 64x as many multiply-adds as fc2 and fc3 together.
  auto build = [](Graph& g) {
    B{g.add_blob("x", {8, 256})} >>
        g.add<InnerProductLayer>("fc1", InnerProductLayer::Options{256}) >>
        g.add<InnerProductLayer>("fc2", InnerProductLayer::Options{4}) >>
        g.add<InnerProductLayer>("fc3", InnerProductLayer::Options{4});
  };
  const std::vector<ModelLayer> layers = model_layers(build);
  REQUIRE(layers.size() == 3);
  CHECK(layers[0].cost > 16 * (layers[1].cost + layers[2].cost));
  CHECK(layers[2].cost > 0);
  // What a cut after each layer crosses: fc1's output (8 x 256 floats), fc2's (8 x 4), nothing
  // after the last.
  CHECK(layers[0].bytes_after == 8 * 256 * 4);
  CHECK(layers[1].bytes_after == 8 * 4 * 4);
  CHECK(layers[2].bytes_after == 0);
  // By work alone fc1 is a stage of its own (cut by count, fc1 and fc2 would share stage 0).
  std::vector<ModelLayer> no_crossing = layers;
  for (ModelLayer& layer : no_crossing) layer.bytes_after = 0;
  CHECK(assign_stages(no_crossing, 2, "m") == std::vector<int>{0, 1, 1});
  // But a cut after fc1 would cost its stage, the costliest, fc1's output both ways: after fc2
  // the cut costs less.
  CHECK(assign_stages(layers, 2, "m") == std::vector<int>{0, 0, 1});
}

TEST_CASE("an interleaved pipeline's cut evens its locations' work, not only its stages'",
          "[pipeline]") {
  // Eight layers; the most even 4 stages (1+5 | 6+4 | 4+3 | 5+6, the costliest 11: the only
  // such cut) give location 0 stages 0 and 2 (13) and location 1 stages 1 and 3 (21).
  std::vector<ModelLayer> layers;
  for (double cost : {1, 5, 6, 4, 4, 3, 5, 6}) layers.push_back({str("l", layers.size()), 1, cost});
  auto location_work = [&](const std::vector<int>& stage_of) {
    std::vector<double> work(2, 0);
    for (size_t i = 0; i < layers.size(); ++i) work[stage_of[i] % 2] += layers[i].cost;
    return work;
  };
  const std::vector<int> plain = assign_stages(layers, 4, "m");
  CHECK(location_work(plain) == std::vector<double>{13, 21});
  const std::vector<int> interleaved =
      assign_stages(layers, 4, "m", kLinkSlowdown, PipelineRun{2, 4, PipelineSchedule::k1F1B});
  CHECK(std::is_sorted(interleaved.begin(), interleaved.end()));
  CHECK(std::set<int>(interleaved.begin(), interleaved.end()).size() == 4);
  const std::vector<double> work = location_work(interleaved);
  CHECK(std::max(work[0], work[1]) <= 18);  // 17 at best
  CHECK_THROWS_WITH(assign_stages(layers, 5, "m", kLinkSlowdown, PipelineRun{2, 4}),
                    Catch::Contains("5 stages do not go round 2 locations evenly"));
}

TEST_CASE(
    "pipeline_time replays a schedule: with equal stages its idle share is the theory's "
    "bubble, interleaved too",
    "[pipeline]") {
  // ZB-H1: its passes a third of the stage each, the weight gradients filling the cool-down.
  for (PipelineSchedule schedule :
       {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B, PipelineSchedule::kZBH1})
    for (int chunks : {1, 2, 3})
      for (int micro_batches : {3, 6, 12}) {
        const int locations = 3, stages = locations * chunks;
        INFO("schedule " << static_cast<int>(schedule) << ", " << chunks << " stages per location, "
                         << micro_batches << " micro-batches");
        // Each location's work: a unit per micro-batch, its stages sharing it evenly.
        const std::vector<double> costs(stages, 1.0 / chunks);
        const double time =
            pipeline_time(costs, PipelineRun{chunks > 1 ? locations : 0, micro_batches, schedule});
        CHECK(1 - micro_batches / time ==
              Approx(bubble_theory(schedule, locations, micro_batches, chunks)));
      }
  // Orders that wait on each other take forever: 1F1B needs a multiple of the locations.
  CHECK_THROWS_WITH(pipeline_time({1, 1, 1, 1}, PipelineRun{2, 3}),
                    Catch::Contains("no multiple of 2"));
}

TEST_CASE("an interleaved cut is the best by pipeline_time, or close to it", "[pipeline]") {
  // Random layers (a fixed seed); every cut of 10 units into 4 stages over 2 locations tried.
  uint32_t seed = 7;
  auto next = [&seed] { return (seed = seed * 1664525u + 1013904223u) >> 16; };
  int best_found = 0;
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<ModelLayer> layers;
    for (int i = 0; i < 10; ++i)
      layers.push_back({str("l", i), 1, 1.0 + static_cast<double>(next() % 9)});
    const PipelineRun run{2, 4, PipelineSchedule::k1F1B};
    auto time_of = [&](const std::vector<int>& stage_of) {
      std::vector<double> costs(4, 0);
      for (size_t i = 0; i < layers.size(); ++i) costs[stage_of[i]] += layers[i].cost;
      return pipeline_time(costs, run);
    };
    double optimum = std::numeric_limits<double>::infinity();
    for (int a = 1; a < 10; ++a)
      for (int b = a + 1; b < 10; ++b)
        for (int c = b + 1; c < 10; ++c) {
          std::vector<int> stage_of(10);
          for (int i = 0; i < 10; ++i) stage_of[i] = (i >= a) + (i >= b) + (i >= c);
          optimum = std::min(optimum, time_of(stage_of));
        }
    const double found = time_of(assign_stages(layers, 4, "m", kLinkSlowdown, run));
    INFO("trial " << trial);
    CHECK(found <= 1.05 * optimum);
    best_found += found <= optimum * (1 + 1e-9);
  }
  CHECK(best_found >= 18);
}

TEST_CASE("model_layers costs each layer's backward ops too, where the model has an output",
          "[pipeline]") {
  // Two layers of the same forward work; the first computes no gradient of its input (the
  // images need none), so its backward does a third less: with the backward taken as twice the
  // forward, both would cost the same. A dropout after them leaves a mask nobody reads.
  auto build = [](Graph& g) {
    B{g.add_blob("x", {256, 256})} >>
        g.add<InnerProductLayer>("fc1", InnerProductLayer::Options{256}) >>
        g.add<InnerProductLayer>("fc2", InnerProductLayer::Options{256}) >>
        g.add<DropoutLayer>("drop", 0.5, true);
  };
  const std::vector<ModelLayer> layers = model_layers(build);
  REQUIRE(layers.size() == 3);
  CHECK(layers[1].cost > 1.3 * layers[0].cost);
}

TEST_CASE(
    "model_layers lists a model's blocks with their parameter counts, place_stages "
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
  CHECK_THROWS_WITH(place_stages(g, layers, {0, 0, -1}, {Location::cpu(0, 0), Location::cpu(0, 1)}),
                    Catch::Contains("layer 'net::fc2' is in stage -1"));
}

TEST_CASE(
    "interleaved stages: stage j at location j mod S, chunks_of tells a location's stages "
    "apart, a copy going with the stage it brings its data to",
    "[pipeline]") {
  auto build = [](Graph& g) {
    Graph::Scope scope(g, "net");
    return (B{g.add_blob("x", {2, 3})} >>
            g.add<InnerProductLayer>("fc1", InnerProductLayer::Options{4}) >>
            g.add<ActivationLayer>("relu", "relu") >>
            g.add<InnerProductLayer>("fc2", InnerProductLayer::Options{2}))
        .top(0);
  };
  const std::vector<ModelLayer> layers = model_layers([&](Graph& g) { build(g); });
  REQUIRE(layers.size() == 3);
  // fc1 is stage 0 at location 0, relu stage 1 at location 1, fc2 stage 2 at location 0 again.
  const std::vector<Location> at = {Location::cpu(0, 0), Location::cpu(0, 1)};
  const std::vector<int> stage_of = {0, 1, 2};
  Graph g;
  place_stages(g, layers, stage_of, at);
  Blob* logits = build(g);
  Blob* loss = (B{logits, g.add_blob("labels", {2})} >> g.add<SoftmaxLossLayer>("loss")).top(0);
  std::vector<Blob*> weights;
  for (const Parameter& p : g.parameters()) weights.push_back(p.blob);
  backward(g, loss, weights);
  g.validate();
  CHECK(g.blob("net::fc2::weight")->location() == at[0]);
  CHECK(g.blob("net::relu::top")->location() == at[1]);
  const ChunkOf chunk_of = chunks_of(g, layers, stage_of, at);
  std::map<std::string, int> chunks;  // "fc2 forward at 0" -> chunk
  for (const auto& op : g.ops()) {
    if (op->role() != OpRole::kForward && op->role() != OpRole::kBackward) continue;
    const std::string layer = op->type() == "copy"                 ? "copy"
                              : op->name().rfind("net::", 0) == 0  ? op->name().substr(5, 3)
                              : op->name().rfind("loss::", 0) == 0 ? "loss"
                                                                   : op->name();
    const std::string key = str(layer, op->role() == OpRole::kForward ? " forward" : " backward",
                                " at ", op->location().cpu_index);
    const int chunk = chunk_of(*op);
    INFO(op->name() << ": " << key);
    CHECK(chunks.emplace(key, chunk).first->second == chunk);  // one chunk for each kind
  }
  CHECK(chunks == std::map<std::string, int>{
                      {"fc1 forward at 0", 0},
                      {"fc1 backward at 0", 0},
                      {"rel forward at 1", 0},
                      {"rel backward at 1", 0},
                      {"fc2 forward at 0", 1},
                      {"fc2 backward at 0", 1},
                      {"loss forward at 0", 1},  // no layer's: after fc2, which it reads
                      {"loss backward at 0", 1},
                      {"copy forward at 1", 0},   // fc1's output to relu
                      {"copy forward at 0", 1},   // relu's output to fc2, named after relu
                      {"copy backward at 1", 0},  // fc2's input gradient back to relu
                      {"copy backward at 0", 0},  // relu's input gradient back to fc1
                  });
}

namespace {

// Two micro-batches ("micro0", "micro1") of an MLP with its loss, in a pipeline of two stages
// over ranks 0 and 1, with the gradients of their weights built, as every rank builds it.
void build_two_rank_pipeline(Graph& g, const std::vector<Location>& stages) {
  auto build = [](Graph& graph) {
    Graph::Scope scope(graph, "net");
    Blob* logits = (B{graph.add_blob("x", {4, 3})} >>
                    graph.add<InnerProductLayer>("fc1", InnerProductLayer::Options{5}) >>
                    graph.add<ActivationLayer>("relu", "relu") >>
                    graph.add<InnerProductLayer>("fc2", InnerProductLayer::Options{2}))
                       .top(0);
    B{logits, graph.add_blob("labels", {4})} >> graph.add<SoftmaxLossLayer>("loss");
  };
  const std::vector<ModelLayer> layers = model_layers(build);
  place_stages(g, layers, assign_stages(layers, 2, "net"), stages);
  for (int m = 0; m < 2; ++m) {
    Graph::Scope micro(g, "micro" + std::to_string(m));
    Graph::Placement at(g, stages[0]);
    build(g);
  }
  for (int m = 0; m < 2; ++m) {
    const std::string scope = "micro" + std::to_string(m) + "::net::";
    std::vector<Blob*> weights;
    for (const Parameter& p : g.parameters())
      if (p.blob->name().rfind(scope, 0) == 0) weights.push_back(p.blob);
    backward(g, g.blob(scope + "loss::top"), weights);
  }
}

}  // namespace

TEST_CASE(
    "a schedule whose stages would wait on each other across ranks is refused before "
    "running, naming the circle",
    "[pipeline][order]") {
  const std::vector<Location> stages = {Location::cpu(0), Location::cpu(1)};
  {
    Graph g;
    build_two_rank_pipeline(g, stages);
    schedule_pipeline(g, stages, 2, PipelineSchedule::k1F1B);
    g.validate();
  }
  // 1F1B with the warm-ups swapped (stage s warms up with s forwards, not S-1-s): stage 0 waits
  // for micro-batch 0's gradient from stage 1 before it sends micro-batch 1's activations, and
  // stage 1 waits for those before it computes that gradient. Run, both ranks would hang.
  Graph g;
  build_two_rank_pipeline(g, stages);
  schedule_pipeline(g, stages, 2,
                    [](int s) { return schedule_order(PipelineSchedule::k1F1B, 1 - s, 2, 2); });
  REQUIRE_THROWS_WITH(g.validate(), Catch::Contains("has a cycle: ") &&
                                        Catch::Contains("would hang") &&
                                        Catch::Contains("micro1::net::fc1") &&
                                        Catch::Contains("(rank0:cpu, thread main)") &&
                                        Catch::Contains("(rank1:cpu, thread main)"));
}

TEST_CASE("a schedule of one's own must list every pass of every micro-batch once", "[pipeline]") {
  const std::vector<Location> stages = {Location::cpu(0), Location::cpu(1)};
  Graph g;
  build_two_rank_pipeline(g, stages);
  using P = std::vector<PipelineStep>;
  const Pass F = Pass::kForward, B = Pass::kBackward;
  CHECK_THROWS_WITH(schedule_pipeline(g, stages, 2,
                                      [&](int) {
                                        return P{{F, 0}, {B, 0}, {F, 1}};
                                      }),
                    Catch::Contains("stage 0 at rank0:cpu does not list the backward pass of "
                                    "micro-batch 1"));
  CHECK_THROWS_WITH(
      schedule_pipeline(g, stages, 2,
                        [&](int s) {
                          return s == 0 ? schedule_order(PipelineSchedule::kGPipe, 0, 2, 2)
                                        : P{{F, 0}, {F, 0}, {B, 0}, {F, 1}, {B, 1}};
                        }),
      Catch::Contains("stage 1 at rank1:cpu lists the forward pass of micro-batch 0 twice"));
  CHECK_THROWS_WITH(
      schedule_pipeline(g, stages, 2,
                        [&](int) {
                          return P{{F, 2}};
                        }),
      Catch::Contains("lists the forward pass of micro-batch 2, not one of micro-batches 0..1"));
}

TEST_CASE(
    "batch norm chains its micro-batches' updates of the running statistics: an order of one's "
    "own that runs a stage's forwards out of micro-batch order is refused as a cycle",
    "[pipeline][batch_norm]") {
  // Two micro-batches sharing their parameters and running statistics; fc1 and bn at stage 0,
  // fc2 and the loss at stage 1.
  const std::vector<Location> stages = {Location::cpu(0, 0), Location::cpu(0, 1)};
  auto build = [](Graph& graph) -> Blob* {
    Graph::Scope scope(graph, "net");
    Blob* logits = (B{graph.add_blob("x", {4, 3})} >>
                    graph.add<InnerProductLayer>("fc1", InnerProductLayer::Options{5}) >>
                    graph.add<BatchNormLayer>("bn", BatchNormLayer::Options{}) >>
                    graph.add<ActivationLayer>("relu", "relu") >>
                    graph.add<InnerProductLayer>("fc2", InnerProductLayer::Options{2}))
                       .top(0);
    return (B{logits, graph.add_blob("labels", {4})} >> graph.add<SoftmaxLossLayer>("loss")).top(0);
  };
  const std::vector<ModelLayer> layers = model_layers([&](Graph& graph) { build(graph); });
  using P = std::vector<PipelineStep>;
  const Pass F = Pass::kForward, B = Pass::kBackward;
  for (const bool in_order : {true, false}) {
    INFO((in_order ? "forwards in micro-batch order"
                   : "stage 0 runs micro-batch 1's forward first"));
    Graph g;
    REQUIRE(layers.size() == 5);  // fc1, bn, relu, fc2, loss
    place_stages(g, layers, {0, 0, 0, 1, 1}, stages);
    std::vector<Blob*> losses;
    for (int m = 0; m < 2; ++m) {
      Graph::Scope micro(g, "micro" + std::to_string(m));
      g.share_parameters(g.scope_prefix(), "");
      Graph::Placement at(g, stages[0]);
      losses.push_back(build(g));
    }
    REQUIRE(g.states().size() == 2);  // bn's running mean and variance, once
    Blob* total = g.apply("total", "sum", {}, losses)[0];
    std::vector<Blob*> weights;
    for (const Parameter& p : g.parameters()) weights.push_back(p.blob);
    backward(g, total, weights);
    schedule_pipeline(g, stages, 2, [&](int s) {
      if (s == 0 && !in_order) return P{{F, 1}, {F, 0}, {B, 0}, {B, 1}};
      return schedule_order(PipelineSchedule::kGPipe, s, 2, 2);
    });
    if (in_order) {
      g.validate();
    } else {
      REQUIRE_THROWS_WITH(
          g.validate(), Catch::Contains("has a cycle: ") && Catch::Contains("micro0::net::bn::bn"));
    }
  }
}
