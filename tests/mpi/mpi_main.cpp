// The Catch2 main of the multi-rank tests: initializes MPI (MpiContext) and glog, runs the same
// test cases on every rank, then combines the per-rank results so that every rank exits
// non-zero when any rank had a failure (mpirun's exit status then says so whatever rank failed).
#define CATCH_CONFIG_RUNNER
#include <glog/logging.h>
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdio>

#include "purine/mpi.hpp"

int main(int argc, char** argv) {
  google::InitGoogleLogging(argv[0]);
  FLAGS_minloglevel = 2;  // errors only: tests assert on values, not on log lines
  purine::MpiContext mpi(&argc, &argv);
  Catch::Session session;
  // Every rank gets the same arguments, so every rank selects the same test cases.
  const int usage = session.applyCommandLine(argc, argv);
  const auto& config = session.configData();
  const bool listing =
      config.listTests || config.listTestNamesOnly || config.listTags || config.listReporters;
  int failed = usage;
  if (usage == 0) {
    const int result = session.run();  // failures, or the number listed
    failed = listing || config.showHelp ? 0 : result;
  }
  std::fflush(stdout);
  int mine = failed > 0 ? 1 : 0, any = 0, failing_ranks = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &failing_ranks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (mpi.rank() == 0) {
    std::printf("mpi tests: %d of %d ranks had failures\n", failing_ranks, mpi.size());
    std::fflush(stdout);
  }
  return any ? 1 : 0;
}
