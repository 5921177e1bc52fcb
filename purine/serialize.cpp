#include "purine/serialize.hpp"

#include <glog/logging.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/text_format.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "base/error.hpp"
#include "base/rng.hpp"
#include "purine/durable_file.hpp"
#include "purine/mpi_bytes.hpp"

namespace purine {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void set_location(proto::LocationProto* out, Location l) {
  out->set_rank(l.rank);
  out->set_device(l.device);
  out->set_cpu_index(l.cpu_index);
}

}  // namespace

proto::GraphProto graph_to_proto(const Graph& graph) {
  proto::GraphProto g;
  g.set_name(graph.name());
  for (const auto& b : graph.blobs()) {
    proto::BlobProto* out = g.add_blobs();
    out->set_name(b->name());
    for (int64_t d : b->shape().dims()) out->add_shape(d);
    set_location(out->mutable_location(), b->location());
    out->set_accumulating(b->accumulating());
  }
  for (const auto& op : graph.ops()) {
    proto::OpProto* out = g.add_ops();
    out->set_name(op->name());
    out->set_type(op->type());
    set_location(out->mutable_location(), op->location());
    out->set_thread(op->thread());
    for (const Blob* b : op->inputs()) out->add_inputs(b->name());
    for (const Blob* b : op->outputs()) out->add_outputs(b->name());
    for (const auto& [key, value] : op->attrs().values()) {
      proto::AttrProto* attr = out->add_attrs();
      attr->set_name(key);
      if (auto i = std::get_if<int64_t>(&value)) attr->set_i(*i);
      if (auto f = std::get_if<double>(&value)) attr->set_f(*f);
      if (auto s = std::get_if<std::string>(&value)) attr->set_s(*s);
      if (auto l = std::get_if<std::vector<int64_t>>(&value))
        for (int64_t v : *l) attr->add_ints(v);
    }
  }
  return g;
}

namespace {

Location location_of(const proto::LocationProto& l) {
  Location out =
      l.device() < 0 ? Location::cpu(l.rank(), l.cpu_index()) : Location::gpu(l.device(), l.rank());
  return out;
}

Attrs attrs_of(const proto::OpProto& op) {
  Attrs attrs;
  for (const proto::AttrProto& a : op.attrs()) {
    switch (a.value_case()) {
      case proto::AttrProto::kI:
        attrs.set(a.name(), static_cast<int64_t>(a.i()));
        break;
      case proto::AttrProto::kF:
        attrs.set(a.name(), a.f());
        break;
      case proto::AttrProto::kS:
        attrs.set(a.name(), a.s());
        break;
      default:
        attrs.set(a.name(), std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    }
  }
  return attrs;
}

}  // namespace

std::unique_ptr<Graph> import_graph(const std::string& path, int64_t max_bytes) {
  const std::string bytes = read_file_bounded(path, max_bytes, "graph");
  proto::GraphProto g;
  const bool parsed = ends_with(path, ".pbtxt")
                          ? google::protobuf::TextFormat::ParseFromString(bytes, &g)
                          : g.ParseFromString(bytes);
  require(parsed, "graph file '", path, "' does not parse as a ",
          ends_with(path, ".pbtxt") ? "protobuf text" : "binary protobuf", " GraphProto");
  auto graph = std::make_unique<Graph>(g.name());
  graph->set_auto_copy(false);  // the file holds every copy
  const std::string file = str("graph file '", path, "'");
  try {
    Graph::Scope root(*graph, "", true);
    for (const proto::BlobProto& b : g.blobs()) {
      for (int64_t d : b.shape()) require(d >= 0, "blob '", b.name(), "' has a negative extent");
      Graph::Placement at(*graph, location_of(b.location()));
      Blob* blob = graph->add_blob(b.name(),
                                   Shape(std::vector<int64_t>(b.shape().begin(), b.shape().end())));
      if (b.accumulating()) blob->set_accumulating(true);
    }
    for (const proto::OpProto& o : g.ops()) {
      Graph::Placement at(*graph, location_of(o.location()), o.thread());
      Op* op = graph->add_op(o.name(), o.type(), attrs_of(o));
      std::vector<Blob*> inputs, outputs;
      for (const std::string& name : o.inputs()) inputs.push_back(graph->blob(name));
      for (const std::string& name : o.outputs()) outputs.push_back(graph->blob(name));
      graph->set_inputs(op, inputs);
      graph->set_outputs(op, outputs);
    }
    graph->validate();
  } catch (const Error& e) {
    throw Error(str(file, ": ", e.what()));
  }
  return graph;
}

int load_tensors_by_name(Graph& graph, const std::string& path) {
  // Read at most what a file of every blob could need, with load_checkpoint's margin of two
  // optimizer states per tensor (below).
  CheckpointMap every_blob;
  for (const auto& b : graph.blobs()) every_blob.push_back({b->name(), b->shape(), {}, {}});
  const proto::Checkpoint c = read_checkpoint(path, 4 * checkpoint_size_limit(every_blob));
  CheckpointMap map;
  for (const proto::NamedTensor& t : c.tensors())
    if (Blob* b = graph.find_blob(t.name()))
      map.push_back({t.name(), b->shape(), {{b, 0}}, {{b, 0}}});
  require(!map.empty(), "no tensor of '", path, "' names a blob of graph '", graph.name(), "'");
  CheckpointExpectation expected;
  expected.skip_unknown = true;
  load_checkpoint(map, path, expected);
  return static_cast<int>(map.size());
}

void export_graph(const Graph& graph, const std::string& path) {
  if (ends_with(path, ".dot")) return write_file_durably(path, graph.to_dot());
  proto::GraphProto g = graph_to_proto(graph);
  std::string bytes;
  if (ends_with(path, ".pbtxt")) {
    google::protobuf::TextFormat::PrintToString(g, &bytes);
  } else {
    g.SerializeToString(&bytes);
  }
  write_file_durably(path, bytes);
}

// The checkpoint file format (version 2): a 24-byte header, then the payload, a serialized
// proto::Checkpoint. Header, little-endian: the magic "PURINECK", uint32 format version, uint32
// CRC-32 (zlib) of the payload, uint64 payload size. Version 1 files (a bare proto::Checkpoint
// per rank) are refused.
namespace {

const char kMagic[8] = {'P', 'U', 'R', 'I', 'N', 'E', 'C', 'K'};
constexpr uint32_t kFormatVersion = 2;
constexpr size_t kHeaderBytes = 24;
// Besides the values and names: the header, the info and the generators' states.
constexpr int64_t kSizeMargin = 4 << 20;

void put_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}
uint64_t get_le(const std::string& in, size_t at, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i)
    value |= static_cast<uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return value;
}
uint32_t crc32_of(const std::string& bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = reinterpret_cast<const Bytef*>(bytes.data());
  for (size_t left = bytes.size(); left > 0;) {  // zlib takes uInt lengths
    const uInt n = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
    crc = crc32(crc, p, n);
    p += n;
    left -= n;
  }
  return static_cast<uint32_t>(crc);
}

bool on_this_rank(const Blob* blob, CheckpointRanks ranks) {
  return ranks.ranks == 1 || blob->location().rank == ranks.rank;
}

// Rank 0: the file's message from every rank's part.
proto::Checkpoint assemble(const CheckpointMap& map, const CheckpointInfo& info, int ranks,
                           const std::vector<std::string>& parts) {
  proto::Checkpoint c;
  c.set_model(info.model);
  c.set_iteration(info.iteration);
  c.set_ranks(ranks);
  c.set_layout(info.layout);
  std::vector<std::vector<bool>> covered(map.size());
  for (size_t i = 0; i < map.size(); ++i) {
    proto::NamedTensor* t = c.add_tensors();
    t->set_name(map[i].name);
    for (int64_t d : map[i].shape.dims()) t->mutable_tensor()->add_shape(d);
    t->mutable_tensor()->mutable_data()->Resize(static_cast<int>(map[i].shape.count()), 0.0f);
    covered[i].assign(map[i].shape.count(), false);
  }
  for (const std::string& bytes : parts) {
    proto::CheckpointPart part;
    CHECK(part.ParseFromString(bytes)) << "a rank's checkpoint part does not parse";
    c.mutable_rng_states()->insert(part.rng_states().begin(), part.rng_states().end());
    for (const auto& piece : part.pieces()) {
      CHECK(piece.tensor() >= 0 && piece.tensor() < static_cast<int>(map.size()));
      std::vector<bool>& seen = covered[piece.tensor()];
      CHECK(piece.offset() >= 0 &&
            piece.offset() + piece.data_size() <= static_cast<int64_t>(seen.size()))
          << map[piece.tensor()].name << ": a piece beyond the tensor";
      float* out =
          c.mutable_tensors(piece.tensor())->mutable_tensor()->mutable_data()->mutable_data();
      for (int k = 0; k < piece.data_size(); ++k) {
        CHECK(!seen[piece.offset() + k])
            << map[piece.tensor()].name << ": element " << piece.offset() + k << " saved twice";
        seen[piece.offset() + k] = true;
        out[piece.offset() + k] = piece.data(k);
      }
    }
  }
  for (size_t i = 0; i < map.size(); ++i)
    CHECK(std::all_of(covered[i].begin(), covered[i].end(), [](bool b) { return b; }))
        << map[i].name << ": the checkpoint map leaves elements unsaved";
  return c;
}

Shape shape_of(const proto::TensorProto& t) {
  return Shape(std::vector<int64_t>(t.shape().begin(), t.shape().end()));
}

}  // namespace

std::vector<float> gather_piece(const float* values, int64_t count, const TensorPiece& piece,
                                const std::string& name) {
  std::vector<float> out(piece.blob->shape().count());
  for_each_run(piece, [&](int64_t at, int64_t from, int64_t n) {
    require(at >= 0 && at + n <= count, "a piece of tensor '", name, "' held by '",
            piece.blob->name(), "' lies outside its ", count, " elements");
    std::copy(values + at, values + at + n, out.begin() + from);
  });
  return out;
}

std::vector<float> stored_values(const StoredTensor& tensor) {
  std::vector<float> whole(tensor.shape.count(), 0.0f);
  for (const TensorPiece& piece : tensor.saved_from) {
    const std::vector<float> values = piece.blob->tensor().values();  // from any location
    for_each_run(piece, [&](int64_t at, int64_t from, int64_t count) {
      std::copy(values.begin() + from, values.begin() + from + count, whole.begin() + at);
    });
  }
  return whole;
}

TensorPiece piece_of(const Parameter& parameter) {
  return {parameter.blob, parameter.offset, parameter.row_stride};
}

void add_piece(CheckpointMap& map, const std::string& name, const Shape& shape,
               const TensorPiece& piece, bool saved) {
  auto it =
      std::find_if(map.begin(), map.end(), [&](const StoredTensor& t) { return t.name == name; });
  if (it == map.end()) {
    map.push_back({name, shape, {}, {}});
    it = map.end() - 1;
  }
  require(it->shape == shape, "checkpoint map: pieces of tensor '", name,
          "' disagree on its shape (", it->shape, " and ", shape, ")");
  if (saved) it->saved_from.push_back(piece);
  it->loaded_into.push_back(piece);
}

CheckpointMap whole_blobs(const Graph& graph) {
  CheckpointMap map;
  for (const auto* list : {&graph.parameters(), &graph.states()})
    for (const Parameter& p : *list)
      add_piece(map, p.whole.empty() ? p.blob->name() : p.whole,
                p.whole.empty() ? p.blob->shape() : p.whole_shape, piece_of(p), true);
  return map;
}

void save_checkpoint(const CheckpointMap& map, const std::string& path, const CheckpointInfo& info,
                     CheckpointRanks ranks) {
  require(info.model.size() <= kMaxModelName, "cannot save a checkpoint of model '", info.model,
          "': a name of at most ", kMaxModelName, " bytes is recorded");
  proto::CheckpointPart part;
  for (size_t i = 0; i < map.size(); ++i)
    for (const TensorPiece& piece : map[i].saved_from) {
      if (!on_this_rank(piece.blob, ranks)) continue;
      const std::vector<float> values = piece.blob->tensor().values();  // from any location
      for_each_run(piece, [&](int64_t at, int64_t from, int64_t count) {
        auto* out = part.add_pieces();
        out->set_tensor(static_cast<int>(i));
        out->set_offset(at);
        out->mutable_data()->Add(values.begin() + from, values.begin() + from + count);
      });
    }
  part.mutable_rng_states()->insert(info.rng_states.begin(), info.rng_states.end());
  std::string mine;
  CHECK(part.SerializeToString(&mine));
  const std::vector<std::string> parts =
      ranks.ranks > 1 ? mpi_gather_bytes(mine, 0) : std::vector<std::string>{mine};
  // Rank 0 writes; every rank learns the outcome, so that a failure ends them all alike.
  std::string error;
  if (ranks.rank == 0) {
    try {
      std::string payload;
      CHECK(assemble(map, info, ranks.ranks, parts).SerializeToString(&payload));
      write_file_durably(path, checkpoint_file_bytes(payload));
    } catch (const Error& e) {
      error = str("cannot save the checkpoint: ", e.what());
    }
  }
  if (ranks.ranks > 1) error = mpi_broadcast_bytes(error, 0);
  if (!error.empty()) throw Error(error);
}

void save_checkpoint(const Graph& graph, const std::string& path, const CheckpointInfo& info) {
  save_checkpoint(whole_blobs(graph), path, info);
}

int64_t checkpoint_size_limit(const CheckpointMap& map) {
  int64_t bytes = kHeaderBytes + kSizeMargin;
  for (const StoredTensor& t : map)
    bytes += static_cast<int64_t>(sizeof(float)) * t.shape.count() +
             static_cast<int64_t>(t.name.size()) + 16 * (t.shape.dims().size() + 2);
  return bytes;
}

std::string checkpoint_file_bytes(const std::string& payload) {
  std::string out(kMagic, sizeof kMagic);
  put_le(out, kFormatVersion, 4);
  put_le(out, crc32_of(payload), 4);
  put_le(out, payload.size(), 8);
  return out + payload;
}

namespace {

// The header's magic and format version (of `bytes`, the file or its first bytes).
void check_header(const std::string& bytes, const std::string& file) {
  require(bytes.size() >= kHeaderBytes && std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0,
          file, " is not a Purine checkpoint (no PURINECK header)");
  const uint64_t version = get_le(bytes, 8, 4);
  require(version == kFormatVersion, file, " has format version ", version,
          "; this build reads version ", kFormatVersion);
}

}  // namespace

proto::Checkpoint parse_checkpoint(const std::string& bytes, const std::string& path) {
  const std::string file = str("checkpoint '", path, "'");
  check_header(bytes, file);
  const uint64_t size = get_le(bytes, 16, 8);
  const uint64_t held = bytes.size() - kHeaderBytes;
  require(size == held, file, " is ", size > held ? "truncated" : "followed by extra bytes",
          ": its header promises ", size, " payload bytes, the file holds ", held);
  const std::string payload = bytes.substr(kHeaderBytes);
  const uint32_t crc = crc32_of(payload);
  require(crc == get_le(bytes, 12, 4), file, " is corrupt: the payload's CRC-32 is ", crc,
          ", its header says ", get_le(bytes, 12, 4));
  proto::Checkpoint c;
  require(c.ParseFromString(payload), file, " is corrupt: its payload does not parse");
  require(c.iteration() >= 0, file, " is at iteration ", c.iteration(),
          ", which is impossible (negative)");
  std::set<std::string> names;
  for (const proto::NamedTensor& t : c.tensors()) {
    require(names.insert(t.name()).second, file, " holds tensor '", t.name(), "' twice");
    int64_t count = 1;
    for (int64_t d : t.tensor().shape()) {
      require(d >= 0 && (d == 0 || count <= std::numeric_limits<int64_t>::max() / d), file,
              ": tensor '", t.name(), "' has an impossible dimension ", d);
      count *= d;
    }
    require(t.tensor().data_size() == count, file, ": tensor '", t.name(), "' holds ",
            t.tensor().data_size(), " values for shape ", shape_of(t.tensor()));
  }
  return c;
}

proto::Checkpoint read_checkpoint(const std::string& path, int64_t max_bytes) {
  return parse_checkpoint(read_file_bounded(path, max_bytes, "checkpoint"), path);
}

std::string checkpoint_model(const std::string& path) {
  // Checkpoint.model is field 1, so a serialized checkpoint begins with it; a model's name is
  // short. These bytes hold the header, the field's tag and length, and the name.
  constexpr size_t kPrefixBytes = kHeaderBytes + 16 + kMaxModelName;
  const std::string prefix = read_file_prefix(path, kPrefixBytes, "checkpoint");
  const std::string file = str("checkpoint '", path, "'");
  check_header(prefix, file);
  google::protobuf::io::CodedInputStream payload(
      reinterpret_cast<const uint8_t*>(prefix.data()) + kHeaderBytes,
      static_cast<int>(prefix.size() - kHeaderBytes));
  // A tag is the field number shifted left by 3 over the wire type (2: length-delimited).
  const uint32_t tag = payload.ReadTag();
  if (tag >> 3 != proto::Checkpoint::kModelFieldNumber) return "";
  uint32_t length = 0;
  std::string model;
  require((tag & 7) == 2 && payload.ReadVarint32(&length) && length <= kMaxModelName &&
              payload.ReadString(&model, static_cast<int>(length)),
          file, " is corrupt: its model's name does not parse");
  return model;
}

CheckpointInfo load_checkpoint(const CheckpointMap& map, const std::string& path,
                               const CheckpointExpectation& expected) {
  const CheckpointRanks ranks = expected.ranks;
  // Rank 0 reads (at most what the model could need) and shares the bytes or its error.
  std::string bytes, error;
  if (ranks.rank == 0) {
    try {
      // Another model's file is told by its name, before its size.
      const std::string recorded = expected.model.empty() ? "" : checkpoint_model(path);
      require(recorded.empty() || recorded == expected.model, "checkpoint '", path,
              "' is of model '", recorded, "'; this run trains '", expected.model, "'");
      // A training checkpoint holds up to two optimizer states per weight besides it.
      const int64_t limit =
          checkpoint_size_limit(map) * (expected.map_only || expected.skip_unknown ? 4 : 1);
      bytes = read_file_bounded(path, limit, "checkpoint");
    } catch (const Error& e) {
      error = e.what();
    }
  }
  if (ranks.ranks > 1) {
    error = mpi_broadcast_bytes(error, 0);
    if (error.empty()) bytes = mpi_broadcast_bytes(bytes, 0);
  }
  if (!error.empty()) throw Error(error);
  const proto::Checkpoint c = parse_checkpoint(bytes, path);

  // Check everything first, so that a bad file changes nothing.
  const std::string file = str("checkpoint '", path, "'");
  require(expected.model.empty() || c.model() == expected.model, file, " is of model '", c.model(),
          "'; this run trains '", expected.model, "'");
  require(c.iteration() < expected.iteration_below, file, " is at iteration ", c.iteration(),
          " and this run's total is ", expected.iteration_below,
          ": nothing to train (raise --max-iters or --epochs)");
  std::map<std::string, const StoredTensor*> wanted;
  for (const StoredTensor& t : map) wanted[t.name] = &t;
  // The state of a wanted tensor W is named W::<state>.
  auto state_of_wanted = [&wanted](const std::string& name) {
    for (size_t end = name.rfind("::"); end != std::string::npos && end > 0;
         end = name.rfind("::", end - 1))
      if (wanted.count(name.substr(0, end))) return true;
    return false;
  };
  std::map<std::string, const proto::TensorProto*> held;
  for (const proto::NamedTensor& t : c.tensors()) {
    auto it = wanted.find(t.name());
    if (it == wanted.end() &&
        (expected.skip_unknown || (expected.map_only && state_of_wanted(t.name()))))
      continue;
    require(it != wanted.end(), file, " holds tensor '", t.name(), "', which ",
            expected.model.empty() ? "this graph" : "model '" + expected.model + "'",
            " does not have (saved by another version of the model?)");
    require(shape_of(t.tensor()) == it->second->shape, file, ": tensor '", t.name(), "' has shape ",
            shape_of(t.tensor()), ", the graph expects ", it->second->shape);
    held[t.name()] = &t.tensor();
  }
  for (const StoredTensor& t : map)
    require(held.count(t.name), file, " (model '", c.model(), "') has no tensor '", t.name, "'");
  if (c.layout() == expected.layout) {
    for (const std::string& location : expected.generators) {
      auto it = c.rng_states().find(location);
      require(it != c.rng_states().end(), file, " has no random generator state for ", location,
              " (saved with this layout, it should have one)");
      try {
        Rng().set_state(it->second);
      } catch (const Error& e) {
        throw Error(
            str(file, ": the random generator state for ", location, " is bad: ", e.what()));
      }
    }
  }

  for (const StoredTensor& t : map) {
    const float* values = held[t.name]->data().data();
    for (const TensorPiece& piece : t.loaded_into) {
      if (!on_this_rank(piece.blob, ranks)) continue;
      piece.blob->tensor().set_values(gather_piece(values, t.shape.count(), piece, t.name));
    }
  }
  CheckpointInfo info;
  info.model = c.model();
  info.iteration = c.iteration();
  info.ranks = std::max(1, c.ranks());
  info.layout = c.layout();
  info.rng_states = {c.rng_states().begin(), c.rng_states().end()};
  return info;
}

CheckpointInfo load_checkpoint(Graph& graph, const std::string& path,
                               const CheckpointInfo& expected) {
  CheckpointExpectation e;
  e.model = expected.model;
  return load_checkpoint(whole_blobs(graph), path, e);
}

}  // namespace purine
