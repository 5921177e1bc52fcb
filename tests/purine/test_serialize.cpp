// Graph export and checkpoints: round trips, and clear errors for bad files.
#include <catch2/catch.hpp>
#include <fstream>

#include "purine/serialize.hpp"
#include "temp_dir.hpp"

using namespace purine;
using Catch::Contains;

namespace {
using testing::TempDir;

// A graph with one parameter and one state.
struct Net {
  Graph g{"net"};
  Blob* w = g.add_blob("w", {2, 3});
  Blob* s = g.add_blob("s", {3});
  Net() {
    g.add_parameter({w, "fill_constant", {}, 1.0});
    g.add_state({s, "fill_constant", {}, 0.0});
    g.apply("act", "relu", {}, {w}, {"y"});
  }
};
}  // namespace

TEST_CASE("checkpoints round-trip parameters and states", "[serialize]") {
  TempDir dir;
  Net a;
  for (int i = 0; i < 6; ++i) a.w->tensor().mutable_data()[i] = 0.5f * i;
  for (int i = 0; i < 3; ++i) a.s->tensor().mutable_data()[i] = -1.0f * i;
  std::string path = dir.file("ckpt.pb");
  CheckpointInfo saved;
  saved.model = "tiny";
  saved.iteration = 42;
  saved.layout = "plain";
  saved.rng_states = {{"rank0:cpu", "1 2 3"}};
  save_checkpoint(a.g, path, saved);
  Net b;
  CheckpointInfo expected;
  expected.layout = "plain";
  const CheckpointInfo loaded = load_checkpoint(b.g, path, expected);
  for (int i = 0; i < 6; ++i) REQUIRE(b.w->tensor().data()[i] == 0.5f * i);
  for (int i = 0; i < 3; ++i) REQUIRE(b.s->tensor().data()[i] == -1.0f * i);
  CHECK(loaded.model == "tiny");
  CHECK(loaded.iteration == 42);
  CHECK(loaded.layout == "plain");
  CHECK(loaded.rng_states == saved.rng_states);
  // An empty layout (a file of an older version, or a caller that does not care) matches any.
  CHECK(load_checkpoint(b.g, path).iteration == 42);
}

TEST_CASE("a checkpoint of another layout or rank is refused and changes nothing", "[serialize]") {
  TempDir dir;
  Net a;
  a.w->tensor().fill(1);
  CheckpointInfo saved;
  saved.layout = "--reduce=ring --bucket-kb=256";
  saved.rank = 1;
  saved.ranks = 2;
  const std::string path = dir.file("ckpt.pb.rank1");
  save_checkpoint(a.g, path, saved);
  Net b;
  b.w->tensor().fill(7);
  CheckpointInfo expected = saved;
  expected.layout = "--reduce=ring --bucket-kb=0";
  REQUIRE_THROWS_WITH(load_checkpoint(b.g, path, expected),
                      Contains("saved with --reduce=ring --bucket-kb=256") &&
                          Contains("this run has --reduce=ring --bucket-kb=0"));
  expected = saved;
  expected.rank = 0;
  REQUIRE_THROWS_WITH(load_checkpoint(b.g, path, expected),
                      Contains("holds rank 1 of a run on 2 processes; this is rank 0 of 2"));
  REQUIRE(b.w->tensor().data()[0] == 7);
}

TEST_CASE("bad checkpoints are reported and change nothing", "[serialize]") {
  TempDir dir;
  Net net;
  net.w->tensor().fill(7);
  REQUIRE_THROWS_WITH(load_checkpoint(net.g, "/nonexistent/ckpt.pb"),
                      Contains("/nonexistent/ckpt.pb") && Contains("no such file"));
  std::string garbage = dir.file("garbage.pb");
  std::ofstream(garbage) << "\xff\xff\xff not a protobuf";
  REQUIRE_THROWS_WITH(load_checkpoint(net.g, garbage), Contains("corrupt"));

  // A checkpoint of another graph: wrong shape for 'w'.
  Graph other("other");
  Blob* w = other.add_blob("w", {3, 3});
  other.add_parameter({w, "fill_constant", {}, 1.0});
  std::string wrong = dir.file("wrong.pb");
  CheckpointInfo info;
  info.model = "other";
  save_checkpoint(other, wrong, info);
  REQUIRE_THROWS_WITH(load_checkpoint(net.g, wrong),
                      Contains("tensor 'w' has shape [3,3], the graph expects [2,3]"));
  REQUIRE(net.w->tensor().data()[0] == 7);
}

TEST_CASE("graph export writes protobuf and GraphViz", "[serialize]") {
  TempDir dir;
  Net net;
  std::string pb = dir.file("graph.pb");
  export_graph(net.g, pb);
  std::ifstream in(pb, std::ios::binary);
  proto::GraphProto g;
  REQUIRE(g.ParseFromIstream(&in));
  REQUIRE(g.name() == "net");
  REQUIRE(g.ops_size() == 1);
  REQUIRE(g.ops(0).type() == "relu");
  REQUIRE(g.ops(0).inputs(0) == "w");
  REQUIRE(g.ops(0).thread() == "main");
  REQUIRE(g.blobs_size() == 3);
  REQUIRE(g.ops(0).location().device() == -1);
  REQUIRE(g.ops(0).location().cpu_index() == 0);

  // A second CPU location of the process is told apart in the export.
  {
    Graph::Placement second(net.g, Location::cpu(0, 1));
    net.g.apply("act1", "relu", {}, {net.g.blob("w")});
  }
  export_graph(net.g, pb);
  std::ifstream again(pb, std::ios::binary);
  REQUIRE(g.ParseFromIstream(&again));
  REQUIRE(g.ops_size() == 3);  // both relus and the copy of w
  for (const proto::OpProto& op : g.ops()) {
    INFO(op.name());
    CHECK(op.location().cpu_index() == (op.name() == "act" ? 0 : 1));
  }

  std::string dot = dir.file("graph.dot");
  export_graph(net.g, dot);
  std::ifstream dot_in(dot);
  std::string text((std::istreambuf_iterator<char>(dot_in)), {});
  REQUIRE_THAT(text, Contains("\"w\" -> \"act\""));
  REQUIRE_THROWS_WITH(export_graph(net.g, "/nonexistent/dir/g.pb"),
                      Contains("/nonexistent/dir/g.pb"));
}
