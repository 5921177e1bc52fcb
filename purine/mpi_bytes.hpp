// Byte-string collectives over MPI_COMM_WORLD, for control data between training runs
// (checkpoints gathered to rank 0, a file read on rank 0 shared with every rank). Every rank of
// the world must make the same calls in the same order; in a world of one (or without MPI) they
// return at once. Call them from one thread, while no Runnable is running.
#pragma once

#include <string>
#include <vector>

namespace purine {

// Every rank's `mine`, in rank order, on `root`; an empty list elsewhere.
std::vector<std::string> mpi_gather_bytes(const std::string& mine, int root = 0);
// `root`'s `bytes` on every rank (the others' argument is ignored).
std::string mpi_broadcast_bytes(const std::string& bytes, int root = 0);

}  // namespace purine
