// What the tests of the purine tool share: where the built CLI is (PURINE_BINARY_DIR, set by
// ctest; "build" when run by hand from the source tree), running it as a user would, and reading
// the files it writes.
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "run_command.hpp"

namespace purine::testing {

inline std::string purine_binary() {
  const char* dir = std::getenv("PURINE_BINARY_DIR");
  return std::string(dir ? dir : "build") + "/tools/purine";
}

// `purine <args>` through the shell, prefixed by `launcher` (mpirun, taskset ...) when given.
inline CommandResult run_purine(const std::string& args, const std::string& launcher = "") {
  return run_command((launcher.empty() ? "" : launcher + " ") + purine_binary() + " " + args);
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace purine::testing
