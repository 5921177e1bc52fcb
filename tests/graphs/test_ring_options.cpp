// The ring allreduce's ways of moving data (graphs/allreduce.hpp, RingOptions): in segments
// (kRingSegmentBytes) and by direct steps (RingSteps), each chunk is summed in the ring's
// order, so results and training are bit for bit those of the ring of whole chunks. Locations of
// one process stand in for ranks (the MPI case: tests/mpi/test_allreduce.cpp).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "dispatcher/emulated_devices.hpp"
#include "graphs/allreduce.hpp"
#include "graphs/data_parallel.hpp"
#include "graphs/initialize.hpp"
#include "graphs/layers.hpp"
#include "purine/dsl.hpp"
#include "purine/runnable.hpp"

using namespace purine;

namespace {

std::vector<Location> locations(int n, bool gpus = false) {
  std::vector<Location> at;
  for (int d = 0; d < n; ++d) at.push_back(gpus ? Location::gpu(d) : Location::cpu(0, d));
  return at;
}

int ops_of_type(const Graph& g, const std::string& type) {
  int count = 0;
  for (const auto& op : g.ops()) count += op->type() == type;
  return count;
}

struct RingRun {
  std::vector<std::vector<float>> sums;  // per location
  int sum_ops = 0;
};

// The ring of whole chunks: never the exchange, never direct steps.
RingOptions whole_chunks() { return {0, RingSteps::kRing, 0}; }
RingOptions in_segments(int64_t segment_bytes) { return {0, RingSteps::kRing, segment_bytes}; }
RingOptions direct_steps() { return {0, RingSteps::kDirect, 0}; }
// Machine steps with every location on rank 0's machine.
RingOptions machine_steps_on_one() { return {0, RingSteps::kMachines, -1, {0}}; }

// ring_allreduce of `count` floats over `n` locations (CPU ones, or GPUs), whose inputs no two
// summation orders agree on.
RingRun ring_sums(int n, int64_t count, const RingOptions& options, bool gpus = false) {
  Graph g("ring");
  std::vector<Blob*> parts;
  for (int r = 0; r < n; ++r) {
    Graph::Placement placement(g, locations(n, gpus)[r]);
    parts.push_back(g.add_blob("in" + std::to_string(r), {count}));
    float* x = parts.back()->tensor().mutable_data();
    for (int64_t i = 0; i < count; ++i)
      x[i] = static_cast<float>(std::sin(0.37 * i + 1.3 * r) * 1000.0 / 3.0);
  }
  const std::vector<Blob*> sums = ring_allreduce(g, "grad", parts, options);
  Runnable run(g);
  run.run();
  RingRun out;
  for (Blob* s : sums) out.sums.push_back(s->tensor().values());
  out.sum_ops = ops_of_type(g, "sum");
  return out;
}

}  // namespace

TEST_CASE("the ring cuts chunks into segments from kRingSegmentMinRanks ranks on", "[allreduce]") {
  CHECK(ring_segment_bytes(2) == 0);
  CHECK(ring_segment_bytes(kRingSegmentMinRanks - 1) == 0);
  CHECK(ring_segment_bytes(kRingSegmentMinRanks) == kRingSegmentBytes);
  CHECK(ring_segment_bytes(8) == kRingSegmentBytes);
}

TEST_CASE("a segmented ring sums bit for bit as the ring of whole chunks", "[allreduce]") {
  for (int n : {2, 3, 5}) {
    for (int64_t count : {int64_t{7}, int64_t{1001}, int64_t{4099}}) {
      INFO(n << " locations, " << count << " floats");
      const RingRun whole = ring_sums(n, count, whole_chunks());
      // 64 B: segments of 16 floats, the last ones shorter; 1000 B: uneven; -1: the default.
      for (int64_t segment_bytes : {int64_t{64}, int64_t{1000}, int64_t{-1}}) {
        INFO("segments of " << segment_bytes << " bytes");
        const RingRun cut = ring_sums(n, count, in_segments(segment_bytes));
        for (int r = 0; r < n; ++r) REQUIRE(cut.sums[r] == whole.sums[r]);
        // Every segment has its own sums: (n - 1) per segment of each chunk.
        if (segment_bytes == 64 && count / n > 16) CHECK(cut.sum_ops > whole.sum_ops);
      }
      // And the ring sums right: every location holds the same, near the exact sum.
      for (int64_t i = 0; i < count; ++i) {
        double exact = 0;
        for (int r = 0; r < n; ++r)
          exact += static_cast<float>(std::sin(0.37 * i + 1.3 * r) * 1000.0 / 3.0);
        REQUIRE(std::abs(whole.sums[0][i] - exact) <= 1e-4 * (1 + std::abs(exact)));
        for (int r = 1; r < n; ++r) REQUIRE(whole.sums[r][i] == whole.sums[0][i]);
      }
    }
  }
}

TEST_CASE("direct steps sum bit for bit as the ring of whole chunks", "[allreduce]") {
  for (int n : {2, 3, 5}) {
    for (int64_t count : {int64_t{3}, int64_t{7}, int64_t{1001}, int64_t{4099}}) {
      INFO(n << " locations, " << count << " floats");
      const RingRun whole = ring_sums(n, count, whole_chunks());
      const RingRun direct = ring_sums(n, count, direct_steps());
      for (int r = 0; r < n; ++r) REQUIRE(direct.sums[r] == whole.sums[r]);
      // One sum per non-empty chunk, on its owner, where the ring takes n - 1 per chunk.
      const int chunks = static_cast<int>(std::min<int64_t>(n, count));
      CHECK(direct.sum_ops == chunks);
      CHECK(whole.sum_ops == (n - 1) * chunks);
      // Machine steps on one machine are direct steps.
      const RingRun one_machine = ring_sums(n, count, machine_steps_on_one());
      for (int r = 0; r < n; ++r) REQUIRE(one_machine.sums[r] == whole.sums[r]);
      CHECK(one_machine.sum_ops == chunks);
    }
  }
}

TEST_CASE("between GPUs every way of the ring gives the CPU locations' bits", "[allreduce]") {
  // Emulated GPUs (dispatcher/emulated_devices.hpp): the copies between every pair of devices
  // that direct steps make, and the ring's between neighbours, as the GPU path runs them.
  dispatch::ScopedEmulatedDevices emulated(3);
  const RingRun cpu = ring_sums(3, 1001, whole_chunks());
  for (const RingOptions& options : {whole_chunks(), in_segments(64), direct_steps()}) {
    INFO("steps " << (options.steps == RingSteps::kDirect ? "direct" : "ring") << ", segments of "
                  << options.segment_bytes << " bytes");
    const RingRun gpu = ring_sums(3, 1001, options, /*gpus=*/true);
    for (int r = 0; r < 3; ++r) REQUIRE(gpu.sums[r] == cpu.sums[r]);
  }
}

namespace {

// The (from, to) ranks of every copy between ranks in `g`.
std::multiset<std::pair<int, int>> copies_between_ranks(const Graph& g) {
  std::multiset<std::pair<int, int>> copies;
  for (const auto& op : g.ops()) {
    if (op->type() != "copy") continue;
    const int from = op->inputs()[0]->location().rank, to = op->outputs()[0]->location().rank;
    if (from != to) copies.emplace(from, to);
  }
  return copies;
}

}  // namespace

TEST_CASE("machine steps on the paper's cluster: the ring's order in runs by machine",
          "[allreduce]") {
  // 12 ranks, 3 per machine, one chunk of 1000 floats each (one segment). The graph is built on
  // one process and not run (its copies between ranks are MPI's); tests/mpi runs machine steps.
  const std::vector<int> machines = {0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3};
  for (RingSteps steps : {RingSteps::kMachines, RingSteps::kDirect, RingSteps::kRing}) {
    Graph g("ring");
    std::vector<Blob*> parts;
    for (int r = 0; r < 12; ++r) {
      Graph::Placement placement(g, Location::cpu(r));
      parts.push_back(g.add_blob("in" + std::to_string(r), {12 * 1000}));
    }
    ring_allreduce(g, "grad", parts, {0, steps, -1, machines});
    // The graph sends what ring_messages() (which --ring-steps=auto weighs) says it sends.
    const std::vector<std::pair<int, int>> listed = ring_messages(steps, machines);
    CHECK(copies_between_ranks(g) ==
          std::multiset<std::pair<int, int>>(listed.begin(), listed.end()));
    if (steps != RingSteps::kMachines) continue;
    // A sum per run of more than one term: chunks starting on a machine's first rank pass 4
    // whole machines (4 sums); on its second, 5 runs, the first of 2 ranks (5 sums); on its
    // third, 5 runs, the first of one rank alone (4 sums).
    CHECK(ops_of_type(g, "sum") == 4 * 4 + 4 * 5 + 4 * 4);
    int crossing = 0;
    for (const auto& [from, to] : listed) crossing += machines[from] != machines[to];
    CHECK(crossing == 4 * 20);  // 20 chunks off each machine (train/ring_steps.hpp)
  }
}

TEST_CASE("a GPU passes a sum on to another rank from host memory, not from the GPU again",
          "[allreduce]") {
  // One GPU per rank, 4 ranks, the ring's steps in whole chunks (built, not run). The
  // reduce-scatter sends every running sum up from its GPU (4 chunks x 3 steps); the all-gather
  // sends each owner's sum up once and passes the host copy that arrived on around the ring.
  Graph g("ring");
  std::vector<Blob*> parts;
  for (int r = 0; r < 4; ++r) {
    Graph::Placement placement(g, Location::gpu(0, r));
    parts.push_back(g.add_blob("in" + std::to_string(r), {4 * 1000}));
  }
  ring_allreduce(g, "grad", parts, {0, RingSteps::kRing, 0});
  int up = 0, down = 0;
  for (const auto& op : g.ops()) {
    if (op->type() != "copy") continue;
    up += !op->inputs()[0]->location().is_cpu() && op->outputs()[0]->location().is_cpu();
    down += op->inputs()[0]->location().is_cpu() && !op->outputs()[0]->location().is_cpu();
  }
  CHECK(up == 4 * 3 + 4);
  CHECK(down == 4 * 3 + 4 * 3);  // every chunk received comes down once
}

TEST_CASE("machine steps need the machine of every rank", "[allreduce]") {
  Graph g("ring");
  std::vector<Blob*> parts;
  for (int r = 0; r < 3; ++r) {
    Graph::Placement placement(g, Location::cpu(r));
    parts.push_back(g.add_blob("in" + std::to_string(r), {300}));
  }
  CHECK_THROWS_WITH(ring_allreduce(g, "grad", parts, {0, RingSteps::kMachines, -1, {0, 0}}),
                    Catch::Contains("grad: machine steps need the machine of every rank, but none "
                                    "is given for rank 2 (2 given)"));
}

TEST_CASE("ring_allreduce takes direct steps by default above the exchange's range",
          "[allreduce]") {
  // Graphs only (never run): count each one's sums over 3 locations.
  auto sum_ops = [](int64_t bytes, const RingOptions& options) {
    Graph g("ring");
    std::vector<Blob*> parts;
    for (Location at : locations(3)) {
      Graph::Placement placement(g, at);
      parts.push_back(g.add_blob("in" + std::to_string(at.cpu_index), {bytes / 4}));
    }
    ring_allreduce(g, "grad", parts, options);
    return ops_of_type(g, "sum");
  };
  const int64_t large = int64_t{64} << 20;
  CHECK(sum_ops(large, {}) == 3);  // direct: one sum per chunk, on its owner
  CHECK(sum_ops(large, {kExchangeMaxBytes, RingSteps::kRing, -1}) == 6);  // a sum per step
  // Each location receiving at most kExchangeMaxBytes: the one-step exchange, one sum per chunk
  // on every location.
  CHECK(sum_ops(kExchangeMaxBytes / 2, {}) == 9);
  CHECK(sum_ops(kExchangeMaxBytes / 2 + 4, {}) == 3);
}

namespace {

// Weights of every replica after `steps` SGD steps of data parallelism over 4 locations, every
// gradient reduced alone (each reduce-scattered, updated by chunk, all-gathered).
std::vector<std::vector<float>> trained_weights(const RingOptions& ring, int steps = 3) {
  constexpr int kReplicas = 4;
  Graph g("dp");
  std::vector<Blob*> images(kReplicas), labels(kReplicas);
  DataParallelOptions options;
  options.bucket_bytes = 0;
  options.ring = ring;
  DataParallelGraph dp = build_data_parallel(
      g, locations(kReplicas),
      [&](Graph& graph, int replica, int) {
        images[replica] = graph.add_blob("images", {4, 32});
        labels[replica] = graph.add_blob("labels", {4});
        auto& fc1 = graph.add<InnerProductLayer>("fc1", InnerProductLayer::Options{64});
        auto& fc2 = graph.add<InnerProductLayer>("fc2", InnerProductLayer::Options{10});
        auto& loss = graph.add<SoftmaxLossLayer>("loss");
        B{(B{images[replica]} >> fc1 >> fc2).top(0), labels[replica]} >> loss;
        return ReplicaOutputs{loss.top(0), nullptr};
      },
      options);
  initialize_parameters(dp.checkpoint, g, /*seed=*/7, 0);
  for (int r = 0; r < kReplicas; ++r) {
    float* x = images[r]->tensor().mutable_data();
    for (int64_t i = 0; i < images[r]->shape().count(); ++i)
      x[i] = static_cast<float>(std::cos(0.11 * i + r));
    for (int64_t i = 0; i < 4; ++i) labels[r]->tensor().mutable_data()[i] = float((i + r) % 10);
  }
  Runnable step(g);
  for (int it = 0; it < steps; ++it) {
    dp.sgd.set_learning_rate(0.1, 0);
    step.run();
  }
  std::vector<std::vector<float>> weights;
  for (const auto& replica : dp.parameters)
    for (const Parameter& p : replica) weights.push_back(p.blob->tensor().values());
  return weights;
}

}  // namespace

TEST_CASE("data parallel trains bit for bit with the ring in segments, direct and whole",
          "[allreduce]") {
  // fc1's weight: 64 x 32 floats, chunks of 2 KiB over 4 locations, 4 segments of 512 B each.
  const auto whole = trained_weights(whole_chunks());
  const auto cut = trained_weights(in_segments(512));
  const auto direct = trained_weights(direct_steps());
  const auto untrained = trained_weights(whole_chunks(), /*steps=*/0);
  REQUIRE(cut.size() == whole.size());
  REQUIRE(direct.size() == whole.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    REQUIRE(cut[i] == whole[i]);
    REQUIRE(direct[i] == whole[i]);
  }
  // Every replica holds the same weights, which the steps moved.
  const size_t per_replica = whole.size() / 4;
  for (size_t i = per_replica; i < whole.size(); ++i) REQUIRE(whole[i] == whole[i % per_replica]);
  for (size_t i = 0; i < per_replica; ++i) CHECK(whole[i] != untrained[i]);
}
