#include "purine/mpi.hpp"

#include <mpi.h>

#include <cstdlib>
#include <utility>

#include "base/error.hpp"

namespace purine {

namespace {
int provided_level = MPI_THREAD_SINGLE;
}  // namespace

bool mpi_thread_multiple() { return provided_level >= MPI_THREAD_MULTIPLE; }

MpiContext::MpiContext(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // Open MPI installs handlers that print a stack dump on SIGABRT, so an uncaught exception
    // would end in that dump instead of its own message. Keep its handlers for crashes (SIGBUS,
    // SIGFPE, SIGSEGV), drop SIGABRT; a user's own setting wins.
    setenv("OMPI_MCA_opal_signal", "7,8,11", /*overwrite=*/0);
    int provided = MPI_THREAD_SINGLE;
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    owns_ = true;
    if (provided < MPI_THREAD_SERIALIZED) {
      MPI_Finalize();
      throw Error(str("this MPI library provides thread level ", provided,
                      ", below MPI_THREAD_SERIALIZED (", MPI_THREAD_SERIALIZED,
                      ") which Purine's MPI executor needs; use an Open MPI built with threads"));
    }
  }
  MPI_Query_thread(&provided_level);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiContext::~MpiContext() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_ && !finalized) MPI_Finalize();
}

void MpiContext::abort(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();
}

bool mpi_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  return initialized != 0;
}

int mpi_world_rank() {
  if (!mpi_initialized()) return 0;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int mpi_world_size() {
  if (!mpi_initialized()) return 1;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

int mpi_count_ranks(bool yes) {
  int mine = yes ? 1 : 0;
  if (!mpi_initialized()) return mine;
  int count = 0;
  MPI_Allreduce(&mine, &count, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return count;
}

std::vector<int> mpi_machine_of_ranks() {
  if (!mpi_initialized()) return {0};
  MPI_Comm machine;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &machine);
  const int mine = mpi_world_rank();
  int lowest = mine;
  MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, machine);
  MPI_Comm_free(&machine);
  std::vector<int> lowest_of(mpi_world_size());
  MPI_Allgather(&lowest, 1, MPI_INT, lowest_of.data(), 1, MPI_INT, MPI_COMM_WORLD);
  // Lowest ranks appear in increasing order, each first at its own rank.
  std::vector<int> machine_of(lowest_of.size());
  int machines = 0;
  for (size_t r = 0; r < lowest_of.size(); ++r)
    machine_of[r] = lowest_of[r] == static_cast<int>(r) ? machines++ : machine_of[lowest_of[r]];
  return machine_of;
}

LaunchedWorld mpi_launched_world() {
  auto number = [](const char* name, int* value) {
    const char* text = std::getenv(name);
    if (text == nullptr || *text == '\0') return false;
    char* end = nullptr;
    const long v = std::strtol(text, &end, 10);
    if (*end != '\0' || v < 0) return false;
    *value = static_cast<int>(v);
    return true;
  };
  LaunchedWorld world;
  for (const auto& [size, rank] : {std::pair{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
                                   std::pair{"PMI_SIZE", "PMI_RANK"}})
    if (number(size, &world.size)) {
      number(rank, &world.rank);
      world.variable = str(size, "=", world.size);
      return world;
    }
  if (number("PMIX_RANK", &world.rank)) {
    world.size = -1;
    world.variable = str("PMIX_RANK=", world.rank);
  }
  return world;
}

}  // namespace purine
