// MpiContext: MPI for one process. The first instance initializes MPI (asking for
// MPI_THREAD_MULTIPLE and requiring at least MPI_THREAD_SERIALIZED, since the dispatcher's MPI
// executor makes the calls while the main thread waits); destroying the last one finalizes it.
// Without mpirun it is a world of one. An uncaught exception ends the process with its own
// message (Open MPI's stack dump is kept for crashes only). Create one near the top of main()
// and keep it alive while any Runnable exists. Not thread-safe; rank() and size() may be read
// from any thread.
#pragma once

#include <string>
#include <vector>

namespace purine {

class MpiContext {
 public:
  MpiContext(int* argc, char*** argv);
  ~MpiContext();
  MpiContext(const MpiContext&) = delete;
  MpiContext& operator=(const MpiContext&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Ends every rank of the job at once (after a failure that other ranks may be waiting on).
  [[noreturn]] void abort(int code) const;

 private:
  int rank_ = 0;
  int size_ = 1;
  bool owns_ = false;
};

// Whether several threads may call MPI at once (MPI_THREAD_MULTIPLE was provided).
bool mpi_thread_multiple();
// Whether MPI is initialized in this process (an MpiContext exists or did).
bool mpi_initialized();
// The world rank and size, or 0 and 1 when MPI is not initialized.
int mpi_world_rank();
int mpi_world_size();
// How many ranks pass `yes`: a collective over MPI_COMM_WORLD (MPI_Allreduce) that every rank
// must call at the same point; `yes` ? 1 : 0 when MPI is not initialized.
int mpi_count_ranks(bool yes);
// The machine (shared-memory node, MPI_COMM_TYPE_SHARED) of every world rank, numbered by
// their lowest rank: {0, 0, 1, 1} for ranks 0-1 on one machine and 2-3 on another. A collective
// over MPI_COMM_WORLD that every rank must call at the same point; {0} when MPI is not
// initialized.
std::vector<int> mpi_machine_of_ranks();

// The world a launcher announced to this process in its environment, whether or not MPI was
// initialized: Open MPI's OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_RANK, MPICH's PMI_SIZE and
// PMI_RANK, or PMIx's PMIX_RANK (size unknown: -1). Size 0 when no launcher started it.
struct LaunchedWorld {
  int rank = 0;
  int size = 0;
  std::string variable;  // the variable that said so ("OMPI_COMM_WORLD_SIZE=2")
};
LaunchedWorld mpi_launched_world();

}  // namespace purine
