// run_command: runs a shell command line and collects its exit status and its output (stdout and
// stderr together). Shared by the tests that drive the purine tool as a user would.
#pragma once

#include <sys/wait.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

namespace purine::testing {

struct CommandResult {
  int status;          // the exit status, or -1 when the command did not exit normally
  std::string output;  // stdout and stderr, interleaved as written
};

inline CommandResult run_command(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace purine::testing
