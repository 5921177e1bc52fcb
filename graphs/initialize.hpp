// Parameter initialization: runs each parameter's filler operator on its tensor.
#pragma once

#include <cstdint>
#include <vector>

#include "purine/graph.hpp"
#include "purine/mpi.hpp"

namespace purine {

// Fills `parameters` in order from one generator seeded with `seed` (so two lists of the same
// shapes, e.g. two replicas, get identical values).
void fill_parameters(const std::vector<Parameter>& parameters, uint64_t seed);
// Fills every parameter and state of `graph` that is located at `rank`.
void initialize_parameters(const Graph& graph, uint64_t seed, int rank = mpi_world_rank());

}  // namespace purine
