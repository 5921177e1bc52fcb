// Communicator: the MPI communicator a compiled graph's communicating operators use, a duplicate
// of MPI_COMM_WORLD so that their messages never mix with other traffic. Creating one is
// collective over MPI_COMM_WORLD. It is never freed before MPI_Finalize: a collective abandoned
// by a stalled run may still be pending on it, and MPI would go on using it when the late peers
// arrive. Immutable after construction; any thread may read it.
#pragma once

#include <mpi.h>

#include "operators/communicator.hpp"

namespace purine {

class Communicator {
 public:
  Communicator() { MPI_Comm_dup(MPI_COMM_WORLD, &comm_); }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_;
};

// The communicator an operator's context names, or MPI_COMM_WORLD when it names none (a graph
// on one rank, or a call outside a compiled graph).
inline MPI_Comm comm_of(const Communicator* comm) { return comm ? comm->get() : MPI_COMM_WORLD; }

}  // namespace purine
