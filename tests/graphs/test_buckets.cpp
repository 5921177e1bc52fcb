// Gradient buckets (graphs/internal/buckets.hpp): how parameters are grouped, fusing and cutting
// back blobs, and how many reductions a data-parallel graph builds with and without buckets.
#include <catch2/catch.hpp>

#include "base/error.hpp"
#include "graphs/data_parallel.hpp"
#include "graphs/internal/buckets.hpp"
#include "graphs/layers.hpp"
#include "purine/dsl.hpp"
#include "purine/runnable.hpp"

using namespace purine;

using Buckets = std::vector<std::vector<int>>;

TEST_CASE("plan_buckets groups small neighbours and leaves large items alone", "[buckets]") {
  CHECK(plan_buckets({}, 100) == Buckets{});
  CHECK(plan_buckets({10, 20, 30}, 100) == Buckets{{0, 1, 2}});
  // 60 + 50 > 100 closes the first bucket; 100 >= 100 stands alone and closes the open one.
  CHECK(plan_buckets({60, 50, 40, 100, 5, 5}, 100) == Buckets{{0}, {1, 2}, {3}, {4, 5}});
  CHECK(plan_buckets({10, 500, 10}, 100) == Buckets{{0}, {1}, {2}});
  CHECK(plan_buckets({10, 20}, 0) == Buckets{{0}, {1}});  // buckets off
}

TEST_CASE("fuse and unfuse round-trip blobs of several shapes", "[buckets]") {
  Graph g;
  const std::vector<Shape> shapes = {{2, 3}, {4}, {1, 2, 2}};
  std::vector<Blob*> blobs;
  float next = 1;
  for (size_t k = 0; k < shapes.size(); ++k) {
    blobs.push_back(g.add_blob("b" + std::to_string(k), shapes[k]));
    for (int64_t i = 0; i < shapes[k].count(); ++i) blobs[k]->tensor().mutable_data()[i] = next++;
  }
  Blob* flat = fuse(g, "fuse", blobs);
  REQUIRE(flat->shape() == Shape{14});
  Blob* doubled = g.apply("double", "scale", Attrs().set("alpha", 2.0), {flat})[0];
  std::vector<Blob*> pieces = unfuse(g, "unfuse", doubled, shapes);
  REQUIRE(pieces.size() == shapes.size());
  Runnable run(g);
  run.run();
  for (int64_t i = 0; i < 14; ++i) REQUIRE(flat->tensor().data()[i] == static_cast<float>(i + 1));
  next = 1;
  for (size_t k = 0; k < shapes.size(); ++k) {
    REQUIRE(pieces[k]->shape() == shapes[k]);
    for (int64_t i = 0; i < shapes[k].count(); ++i)
      REQUIRE(pieces[k]->tensor().data()[i] == 2 * next++);
  }
}

TEST_CASE("unfuse rejects shapes that do not cover the blob", "[buckets]") {
  Graph g;
  Blob* flat = g.add_blob("flat", {10});
  REQUIRE_THROWS_WITH(unfuse(g, "cut", flat, {{3}, {4}}), Catch::Contains("cut") &&
                                                              Catch::Contains("10 elements") &&
                                                              Catch::Contains("add up to 7"));
}

namespace {

// Cross-rank copies in a 2-rank data-parallel graph of a network with parameters of 4x64x4 =
// 1 KiB (fc1 weight), 4x4 = 16 B (fc1 bias), 4x4x3 = 48 B (fc2 weight) and 12 B (fc2 bias).
int cross_rank_copies(Reduction reduction, int64_t bucket_bytes) {
  Graph g;
  DataParallelOptions options;
  options.reduction = reduction;
  options.bucket_bytes = bucket_bytes;
  build_data_parallel(
      g, {Location::cpu(0), Location::cpu(1)},
      [](Graph& graph, int, int) {
        Blob* x = graph.add_blob("x", {2, 64});
        Blob* labels = graph.add_blob("labels", {2});
        auto& fc1 = graph.add<InnerProductLayer>("fc1", InnerProductLayer::Options{4});
        auto& fc2 = graph.add<InnerProductLayer>("fc2", InnerProductLayer::Options{3});
        B{x} >> fc1 >> fc2;
        ReplicaOutputs out;
        out.loss = graph.apply("xent", "softmax_cross_entropy", {}, {fc2.top(0), labels},
                               {"loss", "p"})[0];
        return out;
      },
      options);
  int copies = 0;
  for (const auto& op : g.ops())
    if (op->type() == "copy" && op->inputs()[0]->location().rank != op->location().rank) ++copies;
  return copies;
}

}  // namespace

TEST_CASE("buckets cut the number of gradient reductions", "[buckets]") {
  // The loss mean travels to rank 0 once; a gradient alone is reduce-scattered and its weights
  // all-gathered around the ring, 2 chunks each way on 2 ranks; a fused bucket this small goes
  // by ring_allreduce's one-step exchange, 1 message each way; a parameter server takes 1
  // gradient in and sends 1 weight out per parameter.
  SECTION("ring: four reductions alone, two with the small gradients fused") {
    CHECK(cross_rank_copies(Reduction::kRing, 0) == 1 + 4 * 4);
    CHECK(cross_rank_copies(Reduction::kRing, 512) == 1 + 2 + 4);  // fc2 + fc1 bias | fc1 weight
    CHECK(cross_rank_copies(Reduction::kRing, 4096) == 1 + 2);
  }
  SECTION("parameter server: fused gradients go in once, weights still go out one by one") {
    CHECK(cross_rank_copies(Reduction::kParameterServer, 0) == 1 + 4 + 4);
    CHECK(cross_rank_copies(Reduction::kParameterServer, 4096) == 1 + 1 + 4);
  }
}
