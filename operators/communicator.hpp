// The MPI communicator of a compiled graph's communicating operators, as the layers above see
// it: an opaque handle (operators/mpi/communicator.hpp defines it, with <mpi.h>), so that no
// public header needs MPI's. purine/runnable.cpp makes one per graph on several ranks and hands
// it to the operators through OpContext.
#pragma once

#include <cstdint>
#include <memory>

namespace purine {

class Communicator;

// A duplicate of MPI_COMM_WORLD, so that the graph's messages never match anyone else's.
// Collective over MPI_COMM_WORLD: every rank calls it, in the same order.
std::shared_ptr<Communicator> duplicate_world_communicator();

// The bytes this process has sent to other ranks so far by point-to-point messages (the copies
// between ranks, ring reductions), counted as they are sent; collectives, whose traffic the MPI
// library decides, are not in it. For benchmarks.
int64_t mpi_bytes_sent();

}  // namespace purine
