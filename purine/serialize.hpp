// Files: the bi-graph exported as protobuf (GraphProto) and checkpoints. A checkpoint stores
// every parameter and state tensor once, by its single-device name and shape, whatever parallel
// layout saved it; a CheckpointMap says where a graph keeps the pieces of each (graphs/
// data_parallel.hpp builds one for any layout; whole_blobs() is the map of a single-location
// graph). Files are written durably (purine/durable_file.hpp: a crash leaves the previous file)
// with a header and a CRC-32 of the payload. Readers check everything first and throw
// purine::Error naming the file and the first offending item; a failed load changes no tensor.
// Not thread-safe; with several ranks, saving and loading are collective (see CheckpointRanks).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "purine.pb.h"
#include "purine/graph.hpp"

namespace purine {

proto::GraphProto graph_to_proto(const Graph& graph);
// Writes the graph as binary protobuf, or as GraphViz text when `path` ends in ".dot", or as
// protobuf text when it ends in ".pbtxt".
void export_graph(const Graph& graph, const std::string& path);

// The graph an export_graph file (.pb or .pbtxt, at most `max_bytes`) describes, rebuilt vertex
// by vertex (every copy is in the file, so none is inserted): runnable once its inputs and
// weights are set (load_tensors_by_name). Throws purine::Error naming the file and the vertex:
// a bad file, an unknown operator type, a name used twice, an op reading a blob the file lacks,
// or shapes the operators refuse (validate()).
std::unique_ptr<Graph> import_graph(const std::string& path, int64_t max_bytes = 1 << 30);

// Sets every blob of `graph` named as a tensor of the checkpoint or weights file at `path` to
// that tensor (other tensors of the file are skipped); returns how many. Throws purine::Error
// naming the tensor when its shape differs from the blob's, changing nothing.
int load_tensors_by_name(Graph& graph, const std::string& path);

// What a checkpoint records besides the tensors.
struct CheckpointInfo {
  std::string model;
  int64_t iteration = 0;
  int ranks = 1;  // of the run that saved it (information only)
  // The parallel layout that saved it (free text, e.g. "ranks=2 locations=1 reduce=ring
  // bucket_kb=256"); the random generators' states carry over only to the same layout.
  std::string layout;
  std::map<std::string, std::string> rng_states;  // of every rank, by location
};

// Elements of a stored tensor, flattened, held by `blob`: [offset, offset + blob's count), or,
// with row_stride > 0, the blob seen as [dims[0], rest] has row r at offset + r * row_stride (a
// block of columns: a weight split by its inputs, Parameter::whole).
struct TensorPiece {
  Blob* blob = nullptr;
  int64_t offset = 0;
  int64_t row_stride = 0;
};
// Calls run(at, from, count) for each contiguous run of `piece`: `count` elements of the blob
// from its element `from` lie at element `at` of the stored tensor.
template <typename Run>
void for_each_run(const TensorPiece& piece, Run run) {
  const Shape& shape = piece.blob->shape();
  const int64_t count = shape.count();
  if (piece.row_stride == 0 || shape.ndim() == 0) {
    run(piece.offset, int64_t{0}, count);
    return;
  }
  const int64_t row = shape.count_from(1);
  for (int64_t r = 0; r < shape[0]; ++r) run(piece.offset + r * piece.row_stride, r * row, row);
}
// One tensor of a checkpoint and where a graph keeps it.
struct StoredTensor {
  std::string name;                      // single-device name
  Shape shape;                           // single-device shape
  std::vector<TensorPiece> saved_from;   // cover every element exactly once
  std::vector<TensorPiece> loaded_into;  // every piece held anywhere (saved_from included)
};
using CheckpointMap = std::vector<StoredTensor>;
// The values of `piece` taken from its stored tensor's `values` (`count` elements). Throws
// purine::Error naming tensor `name` when the piece lies outside it.
std::vector<float> gather_piece(const float* values, int64_t count, const TensorPiece& piece,
                                const std::string& name);
// A stored tensor's values put together from its saved_from pieces, wherever they are.
std::vector<float> stored_values(const StoredTensor& tensor);
// Every parameter and state of a graph by blob name, or by the name of the tensor it is a piece
// of (Parameter::whole).
CheckpointMap whole_blobs(const Graph& graph);
// The piece a parameter or state is of its tensor.
TensorPiece piece_of(const Parameter& parameter);
// Adds `piece` of tensor `name` of `shape` to the map: to its entry if it has one (`saved`: the
// piece is also saved from), else to a new one.
void add_piece(CheckpointMap& map, const std::string& name, const Shape& shape,
               const TensorPiece& piece, bool saved);

// Who takes part. With ranks > 1 every rank of MPI_COMM_WORLD must call (between runs): saving
// gathers the pieces to rank 0, which writes one file and tells every rank whether that worked;
// loading reads the file on rank 0 and broadcasts it. A failure throws the same error on every
// rank, so that none is left waiting.
struct CheckpointRanks {
  int rank = 0;
  int ranks = 1;
};

void save_checkpoint(const CheckpointMap& map, const std::string& path, const CheckpointInfo& info,
                     CheckpointRanks ranks = {});
void save_checkpoint(const Graph& graph, const std::string& path, const CheckpointInfo& info);

// What a load accepts.
struct CheckpointExpectation {
  std::string model;  // empty: any
  // The run's total: a checkpoint at or past it leaves nothing to train.
  int64_t iteration_below = std::numeric_limits<int64_t>::max();
  // When the file's layout equals `layout`, it must hold a valid state for each of these
  // generator locations (Runnable::rng_states of every rank).
  std::string layout;
  std::vector<std::string> generators;
  CheckpointRanks ranks;
  // The map's tensors only: the file may hold the optimizer states of them (`W::history` of a
  // tensor W: a training checkpoint read by an inference graph), which are skipped; any other
  // tensor is still refused (a checkpoint of another version of the model).
  bool map_only = false;
  // Skip every tensor the map lacks (a graph whose blobs take the tensors of their names).
  bool skip_unknown = false;
};

// The largest file a checkpoint of `map` may be: its values, names and a margin.
int64_t checkpoint_size_limit(const CheckpointMap& map);
// Reads and checks a checkpoint file without a graph (e.g. for a fuzzer): at most `max_bytes`
// (checked before reading), the header, the CRC, a payload that parses, a non-negative
// iteration, no tensor twice, every tensor's values matching its shape.
proto::Checkpoint read_checkpoint(const std::string& path, int64_t max_bytes);
// The model a checkpoint file records ("" when none), from its first bytes alone: for choosing
// the graph whose checkpoint_size_limit() then bounds the whole file's read. Checks the header's
// magic and version; the rest of the file is not read.
std::string checkpoint_model(const std::string& path);
// The longest model name a checkpoint_model() reads.
constexpr size_t kMaxModelName = 256;
// The file's bytes for a payload (a serialized proto::Checkpoint): header, CRC, payload. For
// tests and fuzzers that write payloads of their own.
std::string checkpoint_file_bytes(const std::string& payload);
// The same checks on a file's bytes (`path` names it in messages).
proto::Checkpoint parse_checkpoint(const std::string& bytes, const std::string& path);

// Loads every piece of `map` on this rank from the file and returns the file's info. Refuses,
// before any tensor changes, a file of another model, with a tensor the map lacks (unless
// `expected.map_only`) or lacking one it has, of another shape, at an iteration outside [0,
// iteration_below), or without the generator states `expected` asks for.
CheckpointInfo load_checkpoint(const CheckpointMap& map, const std::string& path,
                               const CheckpointExpectation& expected);
// A single-location graph's parameters and states (whole_blobs) by name; `expected.model` is
// checked when not empty.
CheckpointInfo load_checkpoint(Graph& graph, const std::string& path,
                               const CheckpointInfo& expected = {});

}  // namespace purine
