// MpiContext in a user program outside mpirun: an uncaught exception ends the process with the
// C++ runtime's own message, not an Open MPI stack dump.
#include <catch2/catch.hpp>

#include "run_command.hpp"

using Catch::Contains;

TEST_CASE("an uncaught error under an MpiContext ends with its message, no stack dump", "[mpi]") {
  const auto result = purine::testing::run_command(PURINE_UNCAUGHT_ERROR_PROGRAM);
  INFO(result.output);
  REQUIRE(result.status != 0);
  REQUIRE_THAT(result.output,
               Contains("terminate called after throwing an instance of 'purine::Error'") &&
                   Contains("the model file is missing"));
  REQUIRE_THAT(result.output, !Contains("Process received signal"));
}
