// Simulated training (train/simulation.hpp): cluster files and their errors, calibration traces,
// the plan of every rank against compile()'s, and the simulation of data parallelism on 1 and 2
// ranks behaving as it should (compute per rank, communication appearing, a slow network
// costing, impossible layouts refused).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "purine/compile.hpp"
#include "purine/simulation_plan.hpp"
#include "temp_dir.hpp"
#include "train/simulation.hpp"
#include "train/trainer.hpp"

using namespace purine;
using Catch::Contains;
using testing::TempDir;

namespace {

const char kSynthetic[] = "synthetic:1x28x28:10";

// tools/sim/clusters/ of the source tree (this file is tests/train/test_simulation.cpp).
std::string clusters() {
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path().string() +
         "/tools/sim/clusters/";
}

// Two nodes of plenty of cores, one rank each, a network of `network_gbs` GB/s.
proto::ClusterProto two_nodes(double network_gbs = 1.0, int count = 2) {
  return parse_cluster(
      "name: \"test\"\n"
      "nodes { count: " +
          std::to_string(count) +
          " cores: 8 ranks_per_node: 1\n"
          "  cpu { peak_gflops: 50 memory_gigabytes_per_second: 10 op_overhead_us: 5 }\n"
          "  host_memory { latency_us: 1 gigabytes_per_second: 5 } }\n"
          "network { latency_us: 20 gigabytes_per_second: " +
          std::to_string(network_gbs) + " }\n",
      "test.pbtxt");
}

SimulateOptions convnet(int ranks, int batch = 64) {
  SimulateOptions s;
  s.train.model = "convnet";
  s.train.data_dir = kSynthetic;
  s.train.parallel = ranks > 1 ? ParallelLayout::kData : ParallelLayout::kNone;
  s.train.ranks = ranks;
  s.train.rank = 0;
  s.train.batch = batch;
  s.train.threads = 1;
  s.cluster = two_nodes();
  s.iterations = 3;
  return s;
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A made-up trace at `path` of two runs of the training graph of `o`, every op timed at 1 ms,
// read back as a calibration.
TraceTimes trace_of_1ms_ops(const TrainOptions& o, const std::string& path) {
  std::unique_ptr<Graph> graph = build_training_graph(o);
  const SimulationPlan sp = build_simulation_plan(*graph);
  std::string events;
  for (int run = 0; run < 2; ++run)
    for (const auto& task : sp.plan.tasks())
      events += std::string(events.empty() ? "" : ",\n") +
                "{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"name\":\"" + task.name +
                "\",\"ts\":" + std::to_string(run * 1e6) + ",\"dur\":1000.000}";
  write(path, "{\"traceEvents\":[\n" + events + "\n]}\n");
  return read_trace_times(path);
}

}  // namespace

TEST_CASE("cluster files: the example clusters parse", "[simulation]") {
  for (const char* name : {"this_machine", "host_16_cores", "paper_titan_10gbe"}) {
    const proto::ClusterProto c = load_cluster(clusters() + name + ".pbtxt");
    CHECK(c.nodes_size() >= 1);
  }
  const proto::ClusterProto paper = load_cluster(clusters() + "paper_titan_10gbe.pbtxt");
  CHECK(paper.nodes(0).count() * paper.nodes(0).gpus() == 12);
}

TEST_CASE("cluster files: mistakes are refused naming the line or the field", "[simulation]") {
  const std::string cpu =
      "cpu { peak_gflops: 1 memory_gigabytes_per_second: 1 } host_memory { latency_us: 1 "
      "gigabytes_per_second: 1 }";
  CHECK_THROWS_WITH(parse_cluster("name: \"x\"\nnodes { cores: 2 speed: 3 }\n", "c.pbtxt"),
                    Contains("cluster file c.pbtxt:2:") && Contains("speed"));
  CHECK_THROWS_WITH(parse_cluster("name: \"x\"\nnodes { cores: 2 \n", "c.pbtxt"),
                    Contains("cluster file c.pbtxt:"));
  CHECK_THROWS_WITH(parse_cluster("name: \"x\"", "c.pbtxt"), Contains("no nodes"));
  CHECK_THROWS_WITH(parse_cluster("nodes { name: \"a\" cores: 0 " + cpu + " }", "c.pbtxt"),
                    Contains("nodes[0] ('a').cores must be at least 1, got 0"));
  CHECK_THROWS_WITH(parse_cluster("nodes { cores: 1 gpus: 2 " + cpu + " }", "c.pbtxt"),
                    Contains("nodes[0] has 2 GPUs: it needs gpu { ... } and pcie { ... }"));
  CHECK_THROWS_WITH(parse_cluster("nodes { count: 2 cores: 1 " + cpu + " }", "c.pbtxt"),
                    Contains("2 nodes need network"));
  CHECK_THROWS_WITH(
      parse_cluster("nodes { cores: 1 cpu { peak_gflops: -1 memory_gigabytes_per_second: 1 } }",
                    "c.pbtxt"),
      Contains("nodes[0].cpu.peak_gflops must be positive, got -1"));
  CHECK_THROWS_WITH(parse_cluster("nodes { cores: 2 cores_per_rank: 3 " + cpu + " }", "c.pbtxt"),
                    Contains("nodes[0].cores_per_rank must be in [0, cores = 2], got 3"));
  CHECK_THROWS_WITH(parse_cluster("nodes { cores: 2 wake_cost_us: -2 " + cpu + " }", "c.pbtxt"),
                    Contains("nodes[0].wake_cost_us must be >= 0, got -2"));
  CHECK_THROWS_WITH(parse_cluster("nodes { cores: 2 wake_latency_us: -1 " + cpu + " }", "c.pbtxt"),
                    Contains("nodes[0].wake_latency_us must be >= 0, got -1"));
  CHECK_THROWS_WITH(load_cluster("/nonexistent/cluster.pbtxt"),
                    Contains("cluster file '/nonexistent/cluster.pbtxt': cannot open it"));
}

TEST_CASE("calibration traces: medians per task and the runs' rhythm", "[simulation]") {
  TempDir dir;
  // Two executors, three runs 10 ms apart; "b" takes 1, 2 and 3 ms.
  write(dir.file("t.json"),
        "{\"traceEvents\":[\n"
        "{\"ph\":\"X\",\"cat\":\"task\",\"pid\":0,\"tid\":0,\"name\":\"a\",\"ts\":0.000,\"dur\":"
        "4000.000,\"args\":{\"location\":\"rank0:cpu\"}},\n"
        "{\"ph\":\"X\",\"cat\":\"task\",\"pid\":0,\"tid\":0,\"name\":\"a\",\"ts\":10000.000,"
        "\"dur\":4000.000},\n"
        "{\"ph\":\"X\",\"cat\":\"task\",\"pid\":0,\"tid\":0,\"name\":\"a\",\"ts\":20000.000,"
        "\"dur\":4000.000},\n"
        "{\"ph\":\"X\",\"cat\":\"task\",\"pid\":0,\"tid\":1,\"name\":\"b\",\"ts\":4000.000,"
        "\"dur\":1000.000},\n"
        "{\"ph\":\"X\",\"cat\":\"task\",\"pid\":0,\"tid\":1,\"name\":\"b\",\"ts\":14000.000,"
        "\"dur\":3000.000},\n"
        "{\"ph\":\"X\",\"cat\":\"task\",\"pid\":0,\"tid\":1,\"name\":\"b\",\"ts\":24000.000,"
        "\"dur\":2000.000},\n"
        "{\"ph\":\"M\",\"pid\":0,\"tid\":1,\"name\":\"thread_name\",\"args\":{\"name\":\"x\"}}\n"
        "],\"displayTimeUnit\":\"ms\"}\n");
  const TraceTimes t = read_trace_times(dir.file("t.json"));
  CHECK(t.iterations == 3);
  CHECK(t.seconds.at("a") == Approx(4e-3));
  CHECK(t.seconds.at("b") == Approx(2e-3));
  CHECK(t.step_seconds == Approx(10e-3));
  CHECK(t.gap_seconds == Approx(4e-3));  // ends 5, 17 ms; next starts 10, 20: 5 and 3
  write(dir.file("bad.json"), "{\"events\": []}");
  CHECK_THROWS_WITH(read_trace_times(dir.file("bad.json")), Contains("is not a Chrome trace"));
  CHECK_THROWS_WITH(read_trace_times(dir.file("missing.json")), Contains("cannot open it"));
}

namespace {

// Each rank's part of the simulation plan of `o`'s graph has the tasks, executors and
// dependencies compile() gives that rank, with `reuse` its memory plan's orders too.
void check_plan_is_compiles(const TrainOptions& o, bool reuse) {
  // Two graphs alike: memory_plan_orders() makes views in the simulated one, compile() in its.
  std::set<const Blob*> observed, compiled_observed;
  std::unique_ptr<Graph> graph = build_training_graph(o, &observed);
  std::unique_ptr<Graph> compiled_graph = build_training_graph(o, &compiled_observed);
  SimulationPlanOptions plan_options;
  const int ranks = graph_ranks(*graph);
  if (reuse) plan_options.memory_orders = memory_plan_orders(*graph, observed);
  const SimulationPlan sp = build_simulation_plan(*graph, plan_options);
  REQUIRE(sp.ranks == ranks);
  for (int rank = 0; rank < ranks; ++rank) {
    CompileOptions options;
    options.rank = rank;
    options.reuse_memory = reuse;
    options.observed = compiled_observed;
    const CompiledGraph compiled = compile(*compiled_graph, options);
    const dispatch::Plan& real = compiled.plan;
    if (reuse) CHECK(!plan_options.memory_orders[rank].empty());
    // This rank's simulated tasks, in order, by name.
    std::vector<int> mine;
    for (int t = 0; t < static_cast<int>(sp.tasks.size()); ++t)
      if (sp.executor_rank[sp.plan.tasks()[t].executor] == rank) mine.push_back(t);
    REQUIRE(mine.size() == real.tasks().size());
    std::map<int, int> to_real;
    for (size_t i = 0; i < mine.size(); ++i) {
      const dispatch::Task& s = sp.plan.tasks()[mine[i]];
      REQUIRE(s.name == real.tasks()[i].name);
      CHECK(s.location == real.tasks()[i].location);
      CHECK(sp.plan.executors()[s.executor].name ==
            real.executors()[real.tasks()[i].executor].name);
      to_real[mine[i]] = static_cast<int>(i);
    }
    int differing = 0;
    for (size_t i = 0; i < mine.size(); ++i) {
      std::set<int> simulated,
          compiled_successors(real.successors()[i].begin(), real.successors()[i].end());
      for (int next : sp.plan.successors()[mine[i]])
        if (to_real.count(next)) simulated.insert(to_real[next]);
      differing += simulated != compiled_successors;
    }
    CHECK(differing == 0);
  }
}

}  // namespace

TEST_CASE("the simulation plan of every rank is what compile() makes on each rank",
          "[simulation]") {
  TrainOptions o = convnet(2).train;
  o.reduce = Reduction::kRing;
  check_plan_is_compiles(o, /*reuse=*/false);
  // With the memory plan's orders (purine train --reuse-memory, the default): 2 ranks, and the
  // micro-batches of one rank under 1F1B, which share their activations' memory.
  check_plan_is_compiles(o, /*reuse=*/true);
  TrainOptions micro = convnet(1).train;
  micro.micro_batches = 4;
  check_plan_is_compiles(micro, /*reuse=*/true);
}

TEST_CASE("operators declare their cost: convolutions and inner products by FLOPs",
          "[simulation]") {
  TrainOptions o = convnet(1).train;
  o.fuse = false;  // the convolutions as such, not fused with their bias and ReLU
  std::unique_ptr<Graph> graph = build_training_graph(o);
  int convs = 0;
  for (const auto& op : graph->ops()) {
    std::vector<Shape> in, out;
    for (const Blob* b : op->inputs()) in.push_back(b->shape());
    for (const Blob* b : op->outputs()) out.push_back(b->shape());
    const OpCost c = op->kernel().cost(in, out);
    CHECK(c.bytes >= 0);
    if (op->type() == "conv") {
      ++convs;
      // y [N, O, Ho, Wo] * C * kh * kw multiply-adds.
      CHECK(c.flops == 2.0 * out[0].count() * in[1].count_from(1));
    } else if (op->type() == "inner_product") {
      CHECK(c.flops == 2.0 * out[0].count() * in[1][1]);
    } else if (op->type() == "copy") {
      CHECK(c.flops == 0);
    } else if (op->type() == "relu") {
      CHECK(c.flops == out[0].count());
      CHECK(c.bytes == 4.0 * (in[0].count() + out[0].count()));
    }
  }
  CHECK(convs == 2);
}

TEST_CASE("simulated data parallelism: 2 ranks add communication, not compute per rank",
          "[simulation]") {
  const SimulationReport one = simulate_training(convnet(1));
  const SimulationReport two = simulate_training(convnet(2));
  CHECK(one.exposed_communication == 0);
  CHECK(two.transfers > one.transfers);
  // Overlapped by the backward pass (0.0 since the updates count the non-finite weights they
  // write; 0.2% when the divergence check read every weight after the last transfers).
  CHECK(two.exposed_communication < 0.05);
  CHECK(two.nodes == 2);
  // The same compute per rank, but that the ring's sharded update leaves each rank half of
  // the large weights' updates.
  CHECK(two.step_seconds > 0.85 * one.step_seconds);
  CHECK(two.images_per_second > 1.5 * one.images_per_second);
  CHECK(two.images_per_second < 2.4 * one.images_per_second);
  // The same global batch over 2 ranks: half the compute per rank.
  SimulateOptions fast = convnet(2, 32);
  fast.cluster = two_nodes(1000);
  const SimulationReport halves = simulate_training(fast);
  CHECK(halves.step_seconds < 0.7 * one.step_seconds);
  CHECK(halves.step_seconds > 0.4 * one.step_seconds);
  // A slow network costs.
  SimulateOptions slow = convnet(2);
  slow.cluster = two_nodes(0.01);
  const SimulationReport crawling = simulate_training(slow);
  CHECK(crawling.step_seconds > 2 * two.step_seconds);
  CHECK(crawling.exposed_communication > two.exposed_communication);
  // ... and says where: the NICs carry the bytes most of the step; one rank uses no link.
  CHECK(crawling.busiest_link.find(":nic ") != std::string::npos);
  CHECK(crawling.busiest_link_share > 0.5);
  CHECK(crawling.busiest_link_share <= 1);
  CHECK(one.busiest_link.empty());
}

TEST_CASE("simulated --ring-steps=auto: machine steps for ranks placed node by node",
          "[simulation]") {
  // 2 nodes of 2 ranks on a slow network: direct steps send 2 bytes per gradient byte off a
  // node, the ring's steps 1.5 and machine steps 1.25 (train/ring_steps.hpp), and the step
  // follows the bytes.
  SimulateOptions s = convnet(4);
  s.cluster = parse_cluster(
      "name: \"2x2\"\n"
      "nodes { count: 2 cores: 8 ranks_per_node: 2\n"
      "  cpu { peak_gflops: 50 memory_gigabytes_per_second: 10 op_overhead_us: 5 }\n"
      "  host_memory { latency_us: 1 gigabytes_per_second: 5 } }\n"
      "network { latency_us: 20 gigabytes_per_second: 0.02 }\n",
      "2x2.pbtxt");
  const SimulationReport direct = simulate_training(s);
  CHECK(direct.ring_steps == RingSteps::kDirect);  // TrainOptions' default
  CHECK(direct.ring_steps_reason.empty());
  s.automatic_ring_steps = true;
  const SimulationReport automatic = simulate_training(s);
  CHECK(automatic.ring_steps == RingSteps::kMachines);
  CHECK_THAT(automatic.ring_steps_reason, Contains("machine steps send 1.25 bytes") &&
                                              Contains("of 2 machines, direct steps 2"));
  CHECK(automatic.busiest_link.find(":nic ") != std::string::npos);
  CHECK(automatic.step_seconds < 0.9 * direct.step_seconds);
  s.automatic_ring_steps = false;
  s.train.ring_steps = RingSteps::kRing;
  const SimulationReport ring = simulate_training(s);
  CHECK(automatic.step_seconds < 0.95 * ring.step_seconds);
  // Ranks dealt to the nodes in turn (--map-by=node: 0 1 0 1): no two neighbours share a node,
  // machine steps send as much as direct steps (2 bytes per gradient byte), a tie.
  s.automatic_ring_steps = true;
  s.ranks_by_node = true;
  const SimulationReport dealt = simulate_training(s);
  CHECK(dealt.ring_steps == RingSteps::kDirect);
  CHECK_THAT(dealt.ring_steps_reason,
             Contains("machine steps send 2 bytes") && Contains("of 2 machines, direct steps 2"));
  CHECK(dealt.step_seconds > automatic.step_seconds);
  s.ranks_by_node = false;
  // One node: direct steps.
  s.automatic_ring_steps = true;
  s.cluster = two_nodes(0.02, 1);
  s.cluster.mutable_nodes(0)->set_ranks_per_node(4);
  CHECK(simulate_training(s).ring_steps == RingSteps::kDirect);
}

TEST_CASE("simulated ranks bound to a core each: their comm threads wait for that core",
          "[simulation]") {
  // 4 ranks on one node of 8 cores, the cores shared by all (0) or one per rank (1): bound, a
  // rank's ring steps wait for its compute thread's core (poll_delay_us: the OS's time slice).
  const auto one_node = [](int cores_per_rank) {
    return parse_cluster(
        "nodes { cores: 8 ranks_per_node: 4 cores_per_rank: " + std::to_string(cores_per_rank) +
            " poll_delay_us: 1000\n"
            "  cpu { peak_gflops: 50 memory_gigabytes_per_second: 10 op_overhead_us: 5 }\n"
            "  host_memory { latency_us: 1 gigabytes_per_second: 5 } }\n",
        "node.pbtxt");
  };
  SimulateOptions shared = convnet(4);
  shared.cluster = one_node(0);
  SimulateOptions bound = convnet(4);
  bound.cluster = one_node(1);
  const SimulationReport free_cores = simulate_training(shared);
  const SimulationReport one_core = simulate_training(bound);
  CHECK(one_core.step_seconds > 1.05 * free_cores.step_seconds);
  CHECK(one_core.exposed_communication > free_cores.exposed_communication + 0.03);
  // --cores-per-rank binds the shared node's ranks as the file's cores_per_rank does.
  set_cores_per_rank(shared.cluster, 1);
  CHECK(shared.cluster.nodes(0).cores_per_rank() == 1);
  CHECK(simulate_training(shared).step_seconds == one_core.step_seconds);
  CHECK_THROWS_WITH(set_cores_per_rank(shared.cluster, 9),
                    Contains("--cores-per-rank must be in [0, cores = 8] of nodes[0], got 9"));
  // One rank alone is the same either way: nothing to wait for.
  SimulateOptions alone = convnet(1);
  alone.cluster = one_node(1);
  SimulateOptions alone_shared = convnet(1);
  alone_shared.cluster = one_node(0);
  CHECK(simulate_training(alone).step_seconds ==
        Approx(simulate_training(alone_shared).step_seconds).epsilon(0.01));
}

TEST_CASE("simulated ranks sharing a node's memory compute at the measured speed", "[simulation]") {
  // 4 ranks on one node with plenty of cores and a fast memory link: compute dominates.
  const auto one_node = [](const std::string& rank_speed) {
    return parse_cluster(
        "nodes { cores: 8 ranks_per_node: 4 " + rank_speed +
            "\n  cpu { peak_gflops: 50 memory_gigabytes_per_second: 10 op_overhead_us: 5 }\n"
            "  host_memory { latency_us: 1 gigabytes_per_second: 1000 } }\n",
        "node.pbtxt");
  };
  const proto::ClusterProto table = one_node(
      "rank_speed { ranks: 2 speed: 0.9 } rank_speed { ranks: 4 speed: 0.5 } "
      "rank_speed { ranks: 8 speed: 0.4 }");
  const proto::NodeGroupProto& g = table.nodes(0);
  CHECK(rank_speed_at(g, 1) == 1);
  CHECK(rank_speed_at(g, 2) == Approx(0.9));
  CHECK(rank_speed_at(g, 3) == Approx(0.7));  // halfway from 2 ranks to 4
  CHECK(rank_speed_at(g, 6) == Approx(0.45));
  CHECK(rank_speed_at(g, 16) == Approx(0.4));  // the last entry's beyond it
  CHECK(rank_speed_at(one_node("").nodes(0), 8) == 1);

  SimulateOptions plain = convnet(4);
  plain.cluster = one_node("");
  SimulateOptions shared = convnet(4);
  shared.cluster = table;
  const SimulationReport free_memory = simulate_training(plain);
  const SimulationReport half_speed = simulate_training(shared);
  CHECK(free_memory.rank_speed == 1);
  CHECK(half_speed.rank_speed == Approx(0.5));
  // Compute takes twice as long; the transfers do not.
  CHECK(half_speed.step_seconds > 1.7 * free_memory.step_seconds);
  CHECK(half_speed.step_seconds < 2.05 * free_memory.step_seconds);
  // One rank alone on the node: no slowdown.
  SimulateOptions alone = convnet(1);
  alone.cluster = table;
  SimulateOptions alone_plain = convnet(1);
  alone_plain.cluster = one_node("");
  CHECK(simulate_training(alone).step_seconds == simulate_training(alone_plain).step_seconds);
  // Its 2 CPU locations compute at once as 2 ranks do.
  alone.train.parallel = ParallelLayout::kData;
  alone.train.locations = 2;
  alone.train.threads = 2;
  CHECK(simulate_training(alone).rank_speed == Approx(0.9));
  // --rank-speed replaces the file's table.
  proto::ClusterProto overridden = one_node("");
  set_rank_speeds(overridden, "2:0.9,4:0.5");
  CHECK(rank_speed_at(overridden.nodes(0), 4) == Approx(0.5));
  CHECK_THROWS_WITH(
      set_rank_speeds(overridden, "4:0.5,2:0.9"),
      Contains("--rank-speed, entry[1].ranks must exceed the entry before's (4), got 2"));
  CHECK_THROWS_WITH(set_rank_speeds(overridden, "4=0.5"), Contains("'4=0.5' is not RANKS:SPEED"));
  CHECK_THROWS_WITH(set_rank_speeds(overridden, "4:"), Contains("'4:' is not RANKS:SPEED"));
  // --wake-us sets every node's wake costs.
  set_wake_costs(overridden, "31.5:120");
  CHECK(overridden.nodes(0).wake_cost_us() == 31.5);
  CHECK(overridden.nodes(0).wake_latency_us() == 120);
  for (const char* bad : {"31", "31:", ":5", "a:5", "3:-1", "3:5x"})
    CHECK_THROWS_WITH(set_wake_costs(overridden, bad), Contains("is not COST:LATENCY"));
  CHECK_THROWS_WITH(
      one_node("rank_speed { ranks: 1 speed: 0.5 }"),
      Contains("cluster file node.pbtxt: nodes[0].rank_speed[0].ranks must be at least 2"));
  CHECK_THROWS_WITH(one_node("rank_speed { ranks: 2 speed: -1 }"),
                    Contains("nodes[0].rank_speed[0].speed must be in (0, 2], got -1"));
}

TEST_CASE("simulated training: impossible layouts are refused", "[simulation]") {
  SimulateOptions s = convnet(3);
  CHECK_THROWS_WITH(simulate_training(s),
                    Contains("impossible layout: 3 ranks, but the cluster 'test' takes 2"));
  s = convnet(2);
  s.train.devices = {0, 1};
  s.cluster = parse_cluster(
      "name: \"gpus\" nodes { count: 2 cores: 4 gpus: 1 ranks_per_node: 1 cpu { peak_gflops: 1 "
      "memory_gigabytes_per_second: 1 } gpu { peak_gflops: 1 memory_gigabytes_per_second: 1 } "
      "pcie { latency_us: 1 gigabytes_per_second: 1 } host_memory { latency_us: 1 "
      "gigabytes_per_second: 1 } } network { latency_us: 1 gigabytes_per_second: 1 }",
      "gpus.pbtxt");
  CHECK_THROWS_WITH(simulate_training(s), Contains("impossible layout: rank 0 needs 2 GPUs"));
}

TEST_CASE("simulated training: a calibration trace's times replace the roofline", "[simulation]") {
  TempDir dir;
  SimulateOptions s = convnet(1);
  const SimulationReport roofline = simulate_training(s);
  s.calibration = trace_of_1ms_ops(s.train, dir.file("trace.json"));
  s.trace_path = dir.file("simulated.json");
  const SimulationReport calibrated = simulate_training(s);
  CHECK(calibrated.by_name + calibrated.views == calibrated.tasks);
  CHECK(calibrated.by_roofline == 0);
  CHECK(calibrated.step_seconds != roofline.step_seconds);
  CHECK(!calibrated.op_errors.empty());
  CHECK(calibrated.op_errors[0].measured == Approx(1e-3));
  std::ifstream written(s.trace_path);
  std::string text((std::istreambuf_iterator<char>(written)), std::istreambuf_iterator<char>());
  CHECK(text.find("\"traceEvents\"") != std::string::npos);
  CHECK(text.find("rank0:cpu/main") != std::string::npos);
}

TEST_CASE("simulated calibration: a type's ratio learnt on small ops is not given to sized ones",
          "[simulation]") {
  // The one-location trace times every op at 1 ms, among them its only sum, a check of a few
  // floats (divergence::non_finite_weights) that the roofline gives microseconds: a ratio of
  // hundreds. Two locations sum megabytes of gradients: with that ratio a step would take seconds.
  TempDir dir;
  SimulateOptions s = convnet(1);
  s.train.parallel = ParallelLayout::kData;
  s.calibration = trace_of_1ms_ops(s.train, dir.file("trace.json"));
  const SimulationReport one = simulate_training(s);
  s.train.locations = 2;
  s.train.threads = 2;
  const SimulationReport two = simulate_training(s);
  CHECK(two.by_type > 0);
  CHECK(two.step_seconds - two.iteration_gap_seconds <
        one.step_seconds - one.iteration_gap_seconds);
}

TEST_CASE(
    "simulated locations take their ops' times from a one-location trace of as many "
    "micro-batches: the same shapes",
    "[simulation]") {
  TempDir dir;
  SimulateOptions s = convnet(1);
  s.train.parallel = ParallelLayout::kData;
  s.train.micro_batches = 2;  // each of batch 32, as each of 2 locations' share of 64
  s.calibration = trace_of_1ms_ops(s.train, dir.file("trace.json"));
  s.train.micro_batches = 1;
  s.train.locations = 2;
  s.train.threads = 2;
  const SimulationReport two = simulate_training(s);
  INFO(two.by_name << " by name, " << two.by_shape << " by shape, " << two.by_type << " by type, "
                   << two.by_roofline << " by the roofline");
  // Every op of a location's forward and backward by shape; by name the updates, by type or
  // roofline the sums between the locations, which one location has not.
  CHECK(two.by_shape > two.by_name + two.by_type + two.by_roofline);
}

TEST_CASE("simulated copies between a rank's CPU locations are its threads' memcpys",
          "[simulation]") {
  // Not transfers through the node's host memory (the ranks' shared-memory transport): its
  // bandwidth does not change the step.
  SimulateOptions s = convnet(1);
  s.train.parallel = ParallelLayout::kData;
  s.train.locations = 2;
  s.train.threads = 2;
  auto with_host_memory = [&](const std::string& gbs) {
    s.cluster = parse_cluster(
        "name: \"one\" nodes { cores: 2 cpu { peak_gflops: 50 memory_gigabytes_per_second: 10 "
        "op_overhead_us: 5 } host_memory { latency_us: 1 gigabytes_per_second: " +
            gbs + " } }",
        "one.pbtxt");
    return simulate_training(s);
  };
  const SimulationReport slow = with_host_memory("0.01"), fast = with_host_memory("100");
  CHECK(slow.step_seconds == Approx(fast.step_seconds));
  CHECK(slow.transfers == 0);
}

TEST_CASE(
    "simulated interleaved pipeline: calibrated on a one-location trace, half the plain "
    "pipeline's bubble",
    "[simulation][pipeline]") {
  // The trace of a run at one location with 4 micro-batches.
  TempDir dir;
  SimulateOptions s = convnet(1);
  s.train.micro_batches = 4;
  s.calibration = trace_of_1ms_ops(s.train, dir.file("trace.json"));
  s.train.parallel = ParallelLayout::kPipeline;
  s.train.stages = 2;
  s.train.threads = 2;
  const SimulationReport plain = simulate_training(s);
  s.train.virtual_stages = 2;  // the calibration's graph is built without it
  const SimulationReport interleaved = simulate_training(s);
  CHECK(interleaved.by_name > interleaved.tasks / 2);
  CHECK(interleaved.pipeline_stages.size() == 4);
  REQUIRE(plain.pipeline_bubble > 0.05);
  CHECK(interleaved.pipeline_bubble < 0.75 * plain.pipeline_bubble);
}

TEST_CASE("simulated training: device speeds fitted to a 1-device figure", "[simulation]") {
  SimulateOptions s = convnet(2);
  SimulateOptions one = convnet(1);
  one.train.parallel = ParallelLayout::kData;
  const double before = simulate_training(one).images_per_second;
  double factor = 0;
  s.cluster = fit_device_speed(s, 1.5 * before, &factor);
  CHECK(factor > 1.5);  // the fixed overheads do not scale
  one.cluster = s.cluster;
  CHECK(simulate_training(one).images_per_second == Approx(1.5 * before).epsilon(1e-3));
  CHECK_THROWS_WITH(fit_device_speed(s, 1e12, &factor), Contains("cannot fit"));
}

namespace {

// One node with `gpus` GPUs where only launches cost: every GPU op 100 us of launch, its device
// time and every link nearly free, the host free, a recorded iteration's launch 50 us.
proto::ClusterProto launch_bound(int gpus) {
  return parse_cluster(
      "name: \"launch bound\"\n"
      "nodes { cores: 8 gpus: " +
          std::to_string(gpus) +
          "\n"
          "  cpu { peak_gflops: 1e12 memory_gigabytes_per_second: 1e12 op_overhead_us: 0 }\n"
          "  gpu { peak_gflops: 1e12 memory_gigabytes_per_second: 1e12 op_overhead_us: 100\n"
          "        graph_launch_us: 50 }\n"
          "  pcie { latency_us: 0 gigabytes_per_second: 1e12 }\n"
          "  host_memory { latency_us: 0 gigabytes_per_second: 1e12 } }\n",
      "launch_bound.pbtxt");
}

// The tasks of GPU 0's streams that compute or copy (not views), each paying a launch op by op:
// on its main stream, and on its others (the prefetched batch's copies, on "data").
std::pair<int, int> gpu_launches(const TrainOptions& o) {
  std::unique_ptr<Graph> graph = build_training_graph(o);
  const SimulationPlan sp = build_simulation_plan(*graph);
  int main = 0, others = 0;
  for (size_t t = 0; t < sp.tasks.size(); ++t) {
    const dispatch::ExecutorId e = sp.plan.tasks()[t].executor;
    if (sp.executor_location[e].is_cpu() || sp.tasks[t].view) continue;
    ++(sp.plan.executors()[e].name == "rank0:gpu0/main" ? main : others);
  }
  return {main, others};
}

}  // namespace

TEST_CASE("simulated CUDA graphs: a recorded run pays one launch, not one per GPU op",
          "[simulation]") {
  SimulateOptions s = convnet(1);
  s.train.devices = {0};
  s.cluster = launch_bound(1);
  s.train.cuda_graph = false;
  const auto [launches, beside] = gpu_launches(s.train);
  REQUIRE(launches > 20);
  REQUIRE(beside < launches);
  // Op by op: the GPU's main stream launches one op after another, 100 us each (the data
  // stream's copies beside it).
  const SimulationReport eager = simulate_training(s);
  CHECK(eager.device_graph_tasks == 0);
  CHECK(eager.step_seconds == Approx(launches * 100e-6).epsilon(1e-6));
  // Recorded (the Runnable's rule: one rank at one GPU, nothing random there): one launch,
  // every GPU task in the recording.
  s.train.cuda_graph = true;
  const SimulationReport replayed = simulate_training(s);
  CHECK(replayed.device_graph_tasks == launches + beside);
  CHECK(replayed.step_seconds == Approx(50e-6).epsilon(1e-6));
  // Two GPUs in one rank: refused, as the Runnable refuses them; every op pays its launch.
  s.train.devices = {0, 1};
  s.train.parallel = ParallelLayout::kData;
  s.cluster = launch_bound(2);
  const SimulationReport two = simulate_training(s);
  CHECK(two.device_graph_tasks == 0);
  s.train.cuda_graph = false;
  CHECK(two.step_seconds == Approx(simulate_training(s).step_seconds));
}

TEST_CASE("simulated time slicing: MPI's polled allreduces take a share of a busy node's cores",
          "[simulation]") {
  auto one_node = [](int cores) {
    return parse_cluster("name: \"one node\" nodes { cores: " + std::to_string(cores) +
                             " ranks_per_node: 2 cpu { peak_gflops: 50 "
                             "memory_gigabytes_per_second: 10 op_overhead_us: 5 } host_memory { "
                             "latency_us: 1 gigabytes_per_second: 1 } }",
                         "one_node.pbtxt");
  };
  // Two ranks of --reduce=mpi on one node of 2 cores, every gradient reduced alone. fc1's weight
  // gradient (3136 x 1024 floats, 12.85 ms at 1 GB/s) is reduced while both cores run the
  // ranks' backward passes: with time slicing the two ranks' transfers and the two compute
  // threads share the 2 cores at half speed, so the compute threads lose the transfer's 12.85 ms.
  SimulateOptions s = convnet(2);
  s.train.reduce = Reduction::kMpi;
  s.train.bucket_kb = 0;
  s.cluster = one_node(2);
  s.time_slicing = false;
  const SimulationReport whole = simulate_training(s);
  s.time_slicing = true;
  const SimulationReport sliced = simulate_training(s);
  CHECK(sliced.step_seconds - whole.step_seconds == Approx(12.85e-3).margin(0.5e-3));
  // With 8 cores nobody waits for one.
  s.cluster = one_node(8);
  const SimulationReport spare = simulate_training(s);
  s.time_slicing = false;
  CHECK(spare.step_seconds == Approx(simulate_training(s).step_seconds));
}
