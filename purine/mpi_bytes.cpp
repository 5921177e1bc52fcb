#include "purine/mpi_bytes.hpp"

#include <glog/logging.h>
#include <mpi.h>

#include <algorithm>
#include <climits>

#include "base/error.hpp"
#include "purine/mpi.hpp"

namespace purine {

namespace {
int checked_size(size_t n) {
  require(n <= static_cast<size_t>(INT_MAX), "cannot send ", n,
          " bytes in one message between ranks (at most ", INT_MAX, ")");
  return static_cast<int>(n);
}
}  // namespace

std::vector<std::string> mpi_gather_bytes(const std::string& mine, int root) {
  const int ranks = mpi_world_size();
  if (ranks == 1) return {mine};
  const int rank = mpi_world_rank();
  // Sizes first, so that the root can place every part; a part too large still takes part in
  // both collectives (sending nothing), then fails on every rank alike.
  const bool fits = mine.size() <= static_cast<size_t>(INT_MAX);
  const int size = fits ? static_cast<int>(mine.size()) : -1;
  std::vector<int> sizes(ranks);
  CHECK_EQ(MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, root, MPI_COMM_WORLD),
           MPI_SUCCESS);
  std::vector<int> displacements(ranks, 0);
  std::vector<int> counts(ranks, 0);
  long long total = 0;
  for (int r = 0; r < ranks && rank == root; ++r) {
    counts[r] = std::max(0, sizes[r]);
    displacements[r] = static_cast<int>(total);
    total += counts[r];
  }
  const bool root_fits = total <= INT_MAX;
  std::string all(rank == root && root_fits ? static_cast<size_t>(total) : 0, '\0');
  if (!root_fits) std::fill(counts.begin(), counts.end(), 0);
  CHECK_EQ(MPI_Gatherv(mine.data(), fits && root_fits ? size : 0, MPI_BYTE, all.data(),
                       counts.data(), displacements.data(), MPI_BYTE, root, MPI_COMM_WORLD),
           MPI_SUCCESS);
  checked_size(mine.size());
  if (rank != root) return {};
  require(root_fits, "cannot gather ", total, " bytes on rank ", root, " (at most ", INT_MAX, ")");
  std::vector<std::string> parts;
  for (int r = 0; r < ranks; ++r) {
    require(sizes[r] >= 0, "rank ", r, "'s part is too large to send");
    parts.push_back(all.substr(displacements[r], counts[r]));
  }
  return parts;
}

std::string mpi_broadcast_bytes(const std::string& bytes, int root) {
  if (mpi_world_size() == 1) return bytes;
  const bool is_root = mpi_world_rank() == root;
  long long size = is_root ? static_cast<long long>(bytes.size()) : 0;
  if (is_root && size > INT_MAX) size = -1;
  CHECK_EQ(MPI_Bcast(&size, 1, MPI_LONG_LONG, root, MPI_COMM_WORLD), MPI_SUCCESS);
  require(size >= 0, "cannot broadcast more than ", INT_MAX, " bytes from rank ", root);
  std::string out = is_root ? bytes : std::string(static_cast<size_t>(size), '\0');
  CHECK_EQ(MPI_Bcast(out.data(), static_cast<int>(size), MPI_BYTE, root, MPI_COMM_WORLD),
           MPI_SUCCESS);
  return out;
}

}  // namespace purine
