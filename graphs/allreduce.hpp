// Gradient reduction across locations, composed of ordinary graph ops (copy, sum, split,
// concat, reshape). Every function takes one blob per participant, `parts[r]` at its own
// location (one location per rank), all of one shape, and builds the ops under the scope `name`.
//   ring_allreduce:  reduce-scatter then all-gather around the ring of parts; each rank sends
//                    2(N-1)/N of the data. Returns the sum at every part's location.
//   mpi_allreduce:   one native MPI_Allreduce op per rank, for comparison.
//   aggregate:       the parameter server's half: every part copied to `server` and summed there
//                    in participant order.
//   distribute:      a blob copied to each location (copies are reused per location).
// Sums are in a fixed order, so every run gives bit-identical results.
#pragma once

#include <string>
#include <vector>

#include "purine/graph.hpp"

namespace purine {

enum class Reduction { kRing, kParameterServer, kMpi };
// "ring", "ps" or "mpi"; throws purine::Error naming the choices otherwise.
Reduction parse_reduction(const std::string& name);

std::vector<Blob*> ring_allreduce(Graph& graph, const std::string& name,
                                  const std::vector<Blob*>& parts);
std::vector<Blob*> mpi_allreduce(Graph& graph, const std::string& name,
                                 const std::vector<Blob*>& parts);
Blob* aggregate(Graph& graph, const std::string& name, const std::vector<Blob*>& parts,
                Location server);
std::vector<Blob*> distribute(Graph& graph, Blob* source, const std::vector<Location>& to);

}  // namespace purine
