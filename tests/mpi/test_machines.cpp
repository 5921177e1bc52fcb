// mpi_machine_of_ranks() (purine/mpi.hpp) in a real MPI world: ctest launches every rank on
// this one machine, so every rank is on machine 0, and every rank sees the same list.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "mpi_test.hpp"
#include "purine/mpi.hpp"
#include "train/ring_steps.hpp"

using namespace purine;
using namespace purine::mpitest;

TEST_CASE("the ranks of one machine are all on machine 0, and --ring-steps=auto goes direct",
          "[mpi]") {
  const std::vector<int> machines = mpi_machine_of_ranks();
  std::string list;
  for (int m : machines) list += std::to_string(m) + " ";
  const std::vector<std::string> lists = allgather(list);
  for (const std::string& other : lists) CHECK(other == lists[0]);
  CHECK(machines == std::vector<int>(size(), 0));
  CHECK(choose_ring_steps(machines).steps == RingSteps::kDirect);
}
