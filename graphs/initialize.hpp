// Parameter initialization. Every parameter and state tensor is filled by its filler from a
// generator of its own, seeded from the run's seed and the tensor's single-device name (its name
// in a CheckpointMap). Its values therefore depend on neither the other tensors nor the order of
// registration nor the parallel layout: a graph whose parameters are replicated or split over
// locations and ranks starts from the weights of the one-location graph.
#pragma once

#include <cstdint>

#include "purine/graph.hpp"
#include "purine/mpi.hpp"
#include "purine/serialize.hpp"

namespace purine {

// Fills every piece of `map` held at `rank`: the whole single-device tensor is drawn by the
// filler of the parameter (or state) of `graph` holding a piece of it, at the single-device
// shape (so fans are those of the whole tensor), and each piece receives its elements. Throws
// purine::Error when no piece of a tensor is a parameter or state of `graph`.
void initialize_parameters(const CheckpointMap& map, const Graph& graph, uint64_t seed,
                           int rank = mpi_world_rank());
// A single-location graph: every parameter and state by its blob name (whole_blobs).
void initialize_parameters(const Graph& graph, uint64_t seed, int rank = mpi_world_rank());

}  // namespace purine
