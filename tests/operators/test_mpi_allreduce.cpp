// mpi_allreduce (operators/mpi_allreduce.hpp) in a process that never initialized MPI, as the
// purine tool runs when no launcher started it: a world of one rank, whose sum is its own input.
// (Over several ranks: tests/mpi/test_allreduce.cpp.)
#include <mpi.h>

#include <catch2/catch.hpp>

#include "operators/registry.hpp"
#include "tests/operators/gradient_test.hpp"

using namespace purine;
using namespace purine::testing;

TEST_CASE("mpi_allreduce without MPI is the sum over a world of one", "[mpi_allreduce]") {
  int initialized = 1;
  MPI_Initialized(&initialized);
  REQUIRE(initialized == 0);  // this test program never starts MPI
  const Tensor x = tensor_of({2, 3}, {1, -2, 3.5f, 0, 7, -0.25f});
  const std::vector<Tensor> out = run_forward("mpi_allreduce", {}, {x});
  REQUIRE(out.size() == 1);
  CHECK(out[0].values() == x.values());
}
