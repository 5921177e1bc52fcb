// Graph export and checkpoints: round trips, layouts mapped by pieces, and clear errors for bad
// files that change no tensor.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
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

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A file in the checkpoint format (purine/serialize.cpp) around any message, to build bad ones.
void write_raw(const std::string& path, const proto::Checkpoint& c) {
  std::string payload;
  REQUIRE(c.SerializeToString(&payload));
  auto le = [](uint64_t v, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
    return out;
  };
  const uLong crc =
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(payload.data()), payload.size());
  write_all(path, "PURINECK" + le(2, 4) + le(crc, 4) + le(payload.size(), 8) + payload);
}

// A valid message for Net, to spoil one item at a time.
proto::Checkpoint good_message() {
  proto::Checkpoint c;
  c.set_model("tiny");
  c.set_iteration(5);
  c.set_layout("plain");
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    proto::NamedTensor* t = c.add_tensors();
    t->set_name(name);
    int64_t count = 1;
    for (int64_t d : shape) {
      t->mutable_tensor()->add_shape(d);
      count *= d;
    }
    for (int64_t i = 0; i < count; ++i) t->mutable_tensor()->add_data(3.0f);
  };
  add("w", {2, 3});
  add("s", {3});
  return c;
}
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
  expected.model = "tiny";
  const CheckpointInfo loaded = load_checkpoint(b.g, path, expected);
  for (int i = 0; i < 6; ++i) REQUIRE(b.w->tensor().data()[i] == 0.5f * i);
  for (int i = 0; i < 3; ++i) REQUIRE(b.s->tensor().data()[i] == -1.0f * i);
  CHECK(loaded.model == "tiny");
  CHECK(loaded.iteration == 42);
  CHECK(loaded.layout == "plain");
  CHECK(loaded.rng_states == saved.rng_states);
  // The fuzzers' entry point: the file alone, checked.
  const proto::Checkpoint c = read_checkpoint(path, 1 << 20);
  CHECK(c.tensors_size() == 2);
  CHECK(c.iteration() == 42);
}

TEST_CASE("a tensor saved in pieces loads into another layout's pieces", "[serialize]") {
  // Layout A keeps "h" (shape [5]) as two chunks on two blobs (as the sharded ring update keeps
  // momentum); layout B keeps it whole, twice (as replicas do), and saves from its first copy.
  TempDir dir;
  Graph a("a");
  Blob* lo = a.add_blob("h_lo", {3});
  Blob* hi = a.add_blob("h_hi", {2});
  for (int i = 0; i < 3; ++i) lo->tensor().mutable_data()[i] = 10.0f + i;
  for (int i = 0; i < 2; ++i) hi->tensor().mutable_data()[i] = 13.0f + i;
  StoredTensor sharded{"h", Shape{5}, {{hi, 3}, {lo, 0}}, {{lo, 0}, {hi, 3}}};
  CheckpointInfo info;
  info.model = "m";
  save_checkpoint(CheckpointMap{sharded}, dir.file("a.ckpt"), info);

  Graph b("b");
  Blob* h0 = b.add_blob("replica0::h", {5});
  Blob* h1 = b.add_blob("replica1::h", {5});
  h0->tensor().fill(0);
  h1->tensor().fill(0);
  const CheckpointMap whole = {{"h", Shape{5}, {{h0, 0}}, {{h0, 0}, {h1, 0}}}};
  CheckpointExpectation expected;
  expected.model = "m";
  load_checkpoint(whole, dir.file("a.ckpt"), expected);
  for (Blob* h : {h0, h1})
    for (int i = 0; i < 5; ++i) CHECK(h->tensor().data()[i] == 10.0f + i);

  // And back: B's whole tensor cut into A's chunks.
  h0->tensor().mutable_data()[4] = -1;
  save_checkpoint(whole, dir.file("b.ckpt"), info);
  load_checkpoint(CheckpointMap{sharded}, dir.file("b.ckpt"), expected);
  CHECK(lo->tensor().data()[0] == 10.0f);
  CHECK(hi->tensor().data()[1] == -1.0f);
}

TEST_CASE("bad checkpoints are refused, naming the file and the item, and change nothing",
          "[serialize]") {
  TempDir dir;
  Net net;
  net.w->tensor().fill(7);
  auto refused = [&](const proto::Checkpoint& c, const std::string& what,
                     CheckpointExpectation expected = {}) {
    const std::string path = dir.file("bad.ckpt");
    write_raw(path, c);
    INFO(what);
    REQUIRE_THROWS_WITH(load_checkpoint(whole_blobs(net.g), path, expected),
                        Contains("checkpoint '" + path + "'") && Contains(what));
    REQUIRE(net.w->tensor().data()[0] == 7);
  };
  CheckpointExpectation tiny;
  tiny.model = "tiny";
  // The good message loads (so each refusal below is its one spoiled item).
  write_raw(dir.file("good.ckpt"), good_message());
  Net other;
  REQUIRE(load_checkpoint(whole_blobs(other.g), dir.file("good.ckpt"), tiny).iteration == 5);
  REQUIRE(other.w->tensor().data()[0] == 3);

  CheckpointExpectation mlp;
  mlp.model = "mlp";
  refused(good_message(), "is of model 'tiny'; this run trains 'mlp'", mlp);
  proto::Checkpoint c = good_message();
  *c.add_tensors() = c.tensors(0);
  refused(c, "holds tensor 'w' twice");
  c = good_message();
  c.mutable_tensors(1)->set_name("extra");
  refused(c, "holds tensor 'extra', which model 'tiny' does not have", tiny);
  c = good_message();
  c.mutable_tensors()->RemoveLast();
  refused(c, "has no tensor 's'");
  c = good_message();
  c.mutable_tensors(0)->mutable_tensor()->set_shape(0, 3);
  c.mutable_tensors(0)->mutable_tensor()->add_data(0);
  c.mutable_tensors(0)->mutable_tensor()->add_data(0);
  c.mutable_tensors(0)->mutable_tensor()->add_data(0);
  refused(c, "tensor 'w' has shape [3,3], the graph expects [2,3]");
  c = good_message();
  c.mutable_tensors(0)->mutable_tensor()->add_data(0);
  refused(c, "tensor 'w' holds 7 values for shape [2,3]");
  c = good_message();
  c.set_iteration(-3);
  refused(c, "is at iteration -3, which is impossible");
  CheckpointExpectation short_run;
  short_run.iteration_below = 5;
  refused(good_message(), "is at iteration 5 and this run's total is 5: nothing to train",
          short_run);
  CheckpointExpectation with_generators;
  with_generators.layout = "plain";
  with_generators.generators = {"rank0:cpu"};
  refused(good_message(), "has no random generator state for rank0:cpu", with_generators);
  c = good_message();
  (*c.mutable_rng_states())["rank0:cpu"] = "not a state";
  refused(c, "the random generator state for rank0:cpu is bad", with_generators);
  // Generators of another layout do not carry over, so none are required.
  with_generators.layout = "other";
  write_raw(dir.file("good.ckpt"), good_message());
  REQUIRE(load_checkpoint(whole_blobs(other.g), dir.file("good.ckpt"), with_generators).iteration ==
          5);
}

TEST_CASE("an inference graph skips its weights' optimizer states, not another model's tensors",
          "[serialize]") {
  TempDir dir;
  Net net;
  auto with_extra = [&](const std::string& name) {
    proto::Checkpoint c = good_message();
    proto::NamedTensor* t = c.add_tensors();
    *t = c.tensors(0);
    t->set_name(name);
    const std::string path = dir.file(name + ".ckpt");
    write_raw(path, c);
    return path;
  };
  CheckpointExpectation inference;
  inference.map_only = true;
  // w's momentum (as SGD names it) and a state of a state are skipped.
  for (const std::string skipped : {"w::history", "w::history::adam_m"}) {
    net.w->tensor().fill(7);
    REQUIRE(load_checkpoint(whole_blobs(net.g), with_extra(skipped), inference).iteration == 5);
    CHECK(net.w->tensor().data()[0] == 3);
  }
  // A tensor of no wanted one's (a conv bias that this version of the model dropped, with its
  // momentum) is refused: skipping it would change what the model computes.
  for (const std::string foreign : {"bias", "bias::history", "ww::history", "::w"}) {
    INFO(foreign);
    net.w->tensor().fill(7);
    REQUIRE_THROWS_WITH(load_checkpoint(whole_blobs(net.g), with_extra(foreign), inference),
                        Contains("holds tensor '" + foreign + "', which this graph does not have"));
    CHECK(net.w->tensor().data()[0] == 7);
  }
  // A graph loaded by names takes what it has.
  CheckpointExpectation by_name;
  by_name.skip_unknown = true;
  REQUIRE(load_checkpoint(whole_blobs(net.g), with_extra("bias"), by_name).iteration == 5);
  CHECK(net.w->tensor().data()[0] == 3);
}

TEST_CASE("damaged, foreign and oversized checkpoint files are refused", "[serialize]") {
  TempDir dir;
  Net net;
  net.w->tensor().fill(7);
  const CheckpointMap map = whole_blobs(net.g);
  REQUIRE_THROWS_WITH(load_checkpoint(net.g, "/nonexistent/ckpt.pb"),
                      Contains("'/nonexistent/ckpt.pb'") && Contains("No such file"));
  const std::string path = dir.file("ckpt");
  save_checkpoint(net.g, path, CheckpointInfo{});
  const std::string good = read_all(path);

  std::string flipped = good;
  flipped[good.size() - 2] ^= 0x10;  // a bit of the last tensor's values
  write_all(path, flipped);
  REQUIRE_THROWS_WITH(load_checkpoint(net.g, path), Contains(path) && Contains("CRC-32"));
  write_all(path, good.substr(0, good.size() - 5));
  REQUIRE_THROWS_WITH(load_checkpoint(net.g, path), Contains(path) && Contains("truncated"));
  write_all(path, "\xff\xff\xff not a checkpoint at all, no header");
  REQUIRE_THROWS_WITH(load_checkpoint(net.g, path), Contains("not a Purine checkpoint"));
  // An endless device: refused after at most the limit, not read until memory runs out.
  REQUIRE_THROWS_WITH(load_checkpoint(net.g, "/dev/zero"),
                      Contains("/dev/zero") && Contains("this model could need"));
  // A regular file larger than the model could need: refused by its size, before reading.
  write_all(path, good);
  std::filesystem::resize_file(path, checkpoint_size_limit(map) + 1);
  REQUIRE_THROWS_WITH(load_checkpoint(net.g, path),
                      Contains(path) && Contains("more than the") &&
                          Contains(std::to_string(checkpoint_size_limit(map))));
  REQUIRE(net.w->tensor().data()[0] == 7);
}

TEST_CASE("a checkpoint's model is read from its first bytes alone", "[serialize]") {
  TempDir dir;
  Net net;
  const std::string path = dir.file("ckpt");
  CheckpointInfo info;
  info.model = "mlp";
  save_checkpoint(net.g, path, info);
  CHECK(checkpoint_model(path) == "mlp");
  // The rest of the file is not read: a damaged payload after the name does not matter.
  std::string bytes = read_all(path);
  bytes.resize(bytes.size() - 8);
  write_all(path, bytes);
  CHECK(checkpoint_model(path) == "mlp");
  save_checkpoint(net.g, path, CheckpointInfo{});
  CHECK(checkpoint_model(path).empty());
  // A name longer than a save records, and a length past the file's end, are refused.
  proto::Checkpoint c;
  c.set_model(std::string(kMaxModelName + 1, 'm'));
  write_all(path, checkpoint_file_bytes(c.SerializeAsString()));
  REQUIRE_THROWS_WITH(checkpoint_model(path), Contains(path) && Contains("does not parse"));
  write_all(path, checkpoint_file_bytes(c.SerializeAsString().substr(0, 10)));
  REQUIRE_THROWS_WITH(checkpoint_model(path), Contains("does not parse"));
  info.model = c.model();
  REQUIRE_THROWS_WITH(save_checkpoint(net.g, path, info),
                      Contains("a name of at most 256 bytes is recorded"));
  // Not checkpoints: an endless device (its first bytes only), a directory, a missing file.
  REQUIRE_THROWS_WITH(checkpoint_model("/dev/zero"), Contains("not a Purine checkpoint"));
  REQUIRE_THROWS_WITH(checkpoint_model(dir.path()), Contains("it is a directory"));
  REQUIRE_THROWS_WITH(checkpoint_model(dir.file("none")), Contains("No such file"));
}

TEST_CASE("a checkpoint that cannot be written is an error and leaves the previous one",
          "[serialize]") {
  TempDir dir;
  Net net;
  net.w->tensor().fill(2);
  const std::string path = dir.file("ckpt");
  save_checkpoint(net.g, path, CheckpointInfo{});
  const std::string before = read_all(path);
  REQUIRE_THROWS_WITH(
      save_checkpoint(net.g, "/dev/full", CheckpointInfo{}),
      Contains("cannot save the checkpoint") && Contains("/dev/full") && Contains("No space left"));
  REQUIRE_THROWS_WITH(save_checkpoint(net.g, path + "/inside", CheckpointInfo{}),
                      Contains(path + "/inside") && Contains("Not a directory"));
  // A crashed writer's temporary beside the file changes nothing for readers.
  write_all(path + ".tmp-99999", before.substr(0, 10));
  net.w->tensor().fill(5);
  REQUIRE(load_checkpoint(net.g, path).iteration == 0);
  REQUIRE(net.w->tensor().data()[0] == 2);
  REQUIRE(read_all(path) == before);
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
  REQUIRE_THROWS_WITH(export_graph(net.g, "/dev/full"), Contains("/dev/full"));
}
