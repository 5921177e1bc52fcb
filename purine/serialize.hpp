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

// Saves the tensors of the graph's parameters and states located on `rank` (of a run on `ranks`
// processes; every rank saves its own file).
// `rng_states` (Runnable::rng_states()) are stored along.
void save_checkpoint(const Graph& graph, const std::string& path, const std::string& model,
                     int64_t iteration, int rank = 0, int ranks = 1,
                     const std::map<std::string, std::string>& rng_states = {});
// Loads them back by name; returns the iteration stored. The file must have been saved by the
// same rank of a run on as many ranks, and hold every parameter and state on `rank` with its
// shape. The stored random generator states go to `rng_states` when given.
int64_t load_checkpoint(Graph& graph, const std::string& path, int rank = 0, int ranks = 1,
                        std::map<std::string, std::string>* rng_states = nullptr);

}  // namespace purine
