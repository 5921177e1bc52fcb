// The purine tool: bad input gives one clear line and a non-zero exit.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <string>

#include "run_command.hpp"
#include "temp_dir.hpp"

namespace {

using Result = purine::testing::CommandResult;

// The purine tool with `args`, started through `launcher` (e.g. "taskset -c 0") if given.
Result run_purine_bound(const std::string& launcher, const std::string& args) {
  const char* dir = std::getenv("PURINE_BINARY_DIR");
  return purine::testing::run_command(launcher + " " + std::string(dir ? dir : "build") +
                                      "/tools/purine " + args);
}

Result run_purine(const std::string& args) { return run_purine_bound("", args); }

size_t lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

using purine::testing::TempDir;

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

using Catch::Contains;

TEST_CASE("missing data directory", "[cli]") {
  Result r = run_purine("train --data=/nonexistent/dir --max-iters=1");
  REQUIRE(r.status != 0);
  REQUIRE(lines(r.output) == 1);
  REQUIRE_THAT(r.output, Contains("error:") && Contains("/nonexistent/dir"));
}

TEST_CASE("non-IDX and truncated data files", "[cli]") {
  TempDir temp;
  const std::string& dir = temp.path();
  for (const char* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                           "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"})
    write_file(dir + "/" + name, "this is not an IDX file at all");
  Result r = run_purine("train --data=" + dir + " --max-iters=1");
  REQUIRE(r.status != 0);
  REQUIRE(lines(r.output) == 1);
  REQUIRE_THAT(r.output, Contains("error:") && Contains(dir));

  // A valid header promising 100 images of 28x28 but carrying only a few bytes.
  std::string header("\x00\x00\x08\x03\x00\x00\x00\x64\x00\x00\x00\x1c\x00\x00\x00\x1c", 16);
  write_file(dir + "/train-images-idx3-ubyte", header + "abc");
  write_file(dir + "/train-labels-idx1-ubyte",
             std::string("\x00\x00\x08\x01\x00\x00\x00\x64", 8) + std::string(100, '\x01'));
  r = run_purine("train --data=" + dir + " --max-iters=1");
  REQUIRE(r.status != 0);
  REQUIRE(lines(r.output) == 1);
  REQUIRE_THAT(r.output, Contains("error:") && Contains("train-images-idx3-ubyte"));
}

TEST_CASE("unknown model lists the known ones", "[cli]") {
  Result r = run_purine("train --model=alexnet9 --max-iters=1");
  REQUIRE(r.status != 0);
  REQUIRE(lines(r.output) == 1);
  REQUIRE_THAT(r.output, Contains("unknown model 'alexnet9'") && Contains("convnet") &&
                             Contains("lenet") && Contains("mlp"));
}

TEST_CASE("bad flag values", "[cli]") {
  for (const char* args :
       {"train --batch=0", "train --threads=0", "train --lr=-1", "train --executor=magic",
        "train --batch=abc", "train --no-such-flag=1", "train --lr-policy=cosine --max-iters=1",
        "train --bucket-kb=-1", "train --locations=2", "train --parallel=data --locations=0",
        "train --parallel=data --locations=3 --batch=64",
        "train --parallel=data --locations=2 --reduce=mpi"}) {
    INFO(args);
    Result r = run_purine(args);
    REQUIRE(r.status != 0);
    REQUIRE(lines(r.output) == 1);
    REQUIRE_THAT(r.output, Contains("ERROR") || Contains("error:"));
  }
}

TEST_CASE("unknown command prints usage", "[cli]") {
  Result r = run_purine("fly");
  REQUIRE(r.status != 0);
  REQUIRE_THAT(r.output, Contains("unknown command 'fly'") && Contains("usage"));
}

TEST_CASE("more threads than the cores the process may use gives a warning", "[cli]") {
  // Bound to one core, as mpirun binds its ranks; the missing data then ends the run early.
  Result r = run_purine_bound("taskset -c 0", "train --threads=2 --data=/nonexistent/dir");
  REQUIRE(r.status != 0);
  REQUIRE_THAT(r.output, Contains("warning: rank 0 may run on 1 core") && Contains("--threads=2") &&
                             Contains("--bind-to none"));
  r = run_purine_bound("taskset -c 0", "train --threads=1 --data=/nonexistent/dir");
  REQUIRE_THAT(r.output, !Contains("warning"));
}
