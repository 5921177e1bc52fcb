// Files: the bi-graph exported as protobuf (GraphProto) and checkpoints (every parameter and
// state tensor by full blob name). Readers validate what they read and throw purine::Error naming
// the file and the problem (missing, not a Purine file, shape mismatch, missing tensor); a
// failed load changes no tensor.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "purine.pb.h"
#include "purine/graph.hpp"

namespace purine {

proto::GraphProto graph_to_proto(const Graph& graph);
// Writes the graph as binary protobuf, or as GraphViz text when `path` ends in ".dot", or as
// protobuf text when it ends in ".pbtxt".
void export_graph(const Graph& graph, const std::string& path);

// What a checkpoint records besides the tensors.
struct CheckpointInfo {
  std::string model;
  int64_t iteration = 0;
  int rank = 0;   // the process that saved it (every rank of a run saves its own file)
  int ranks = 1;  // of a run on this many processes
  // How the graph lays out its state, when that depends on more than the model (for a
  // data-parallel run, the gradient reduction and buckets decide which optimizer state each
  // rank holds). Free text, compared as a whole; empty in files of older versions.
  std::string layout;
  std::map<std::string, std::string> rng_states;  // Runnable::rng_states()
};

// Saves the tensors of the graph's parameters and states located on `info.rank`, with `info`.
void save_checkpoint(const Graph& graph, const std::string& path, const CheckpointInfo& info);
// Loads them back by name and returns the file's info. The file must have been saved by the
// same rank of a run on as many ranks as `expected` names, with the same layout (unless either
// is empty), and hold every parameter and state on that rank with its shape.
CheckpointInfo load_checkpoint(Graph& graph, const std::string& path,
                               const CheckpointInfo& expected = {});

}  // namespace purine
