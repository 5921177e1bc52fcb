// `purine simulate` as a user runs it: its help, a prediction with a scaling table and a
// timeline, and bad input refused with "error: ..." naming what and where, exit status 1.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "purine_cli.hpp"
#include "temp_dir.hpp"

using namespace purine::testing;
using Catch::Contains;

namespace {

const std::string kLayout =
    "simulate --model=convnet --data=synthetic:1x28x28:10 --parallel=data --threads=1 ";

}  // namespace

TEST_CASE("purine simulate --help lists its own flags in its own words", "[cli][simulate]") {
  const CommandResult r = run_purine("simulate --help");
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("usage: purine simulate"));
  CHECK_THAT(r.output, Contains("--ranks"));
  CHECK_THAT(r.output, Contains("--calibrate"));
  CHECK_THAT(r.output, Contains("write the simulated timeline"));
  CHECK_THAT(r.output, !Contains("--lr-policy"));  // no flag that does not shape the graph
}

TEST_CASE("purine simulate prints the step, a scaling table, a plot and a timeline",
          "[cli][simulate]") {
  TempDir dir;
  const CommandResult r =
      run_purine(kLayout + "--ranks=2 --scaling=1,2 --trace=" + dir.file("sim.json") +
                 " --plot=" + dir.file("scaling.svg"));
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("over 2 ranks"));
  CHECK_THAT(r.output, Contains("img/s, exposed communication"));
  CHECK_THAT(r.output, Contains("efficiency"));
  CHECK_THAT(read_file(dir.file("sim.json")), Contains("\"traceEvents\""));
  CHECK_THAT(read_file(dir.file("scaling.svg")), Contains("<svg") && Contains("polyline"));
}

// Each run starts MPI (about a second here): two runs per test case. The cluster file's and the
// trace's errors one by one are tested in tests/train/test_simulation.cpp.
namespace {

void check_refused(const std::string& args, const std::string& message) {
  const CommandResult r = run_purine(kLayout + args);
  INFO(args << "\n" << r.output);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("error: ") && Contains(message));
}

}  // namespace

TEST_CASE("purine simulate prints a pipeline's bubble and where its stages are cut",
          "[cli][simulate][pipeline]") {
  const std::string pipeline =
      "simulate --model=googlenet_small --data=synthetic:1x28x28:10 --parallel=pipeline "
      "--stages=3 --micro-batches=4 --threads=1 --batch=32 ";
  const CommandResult parts = run_purine(pipeline);
  REQUIRE(parts.status == 0);
  CHECK_THAT(parts.output, Contains("pipeline of 3 stages, 4 micro-batches (1f1b): bubble 0."));
  CHECK_THAT(parts.output, Contains("stages by estimated work: 0: conv1..inception_") &&
                               Contains("::"));  // a cut between a module's parts
  const CommandResult layers = run_purine(pipeline + "--stage-cut=layers");
  REQUIRE(layers.status == 0);
  CHECK_THAT(layers.output, Contains("stages by estimated work: 0: conv1..") && !Contains("::"));
}

TEST_CASE("purine simulate refuses a missing or mistyped cluster file naming the line",
          "[cli][simulate]") {
  TempDir dir;
  std::ofstream(dir.file("typo.pbtxt")) << "name: \"x\"\nnodes {\n  cores: 2\n  speed: 3\n}\n";
  check_refused("--cluster=/nonexistent.pbtxt", "cluster file '/nonexistent.pbtxt': cannot open");
  check_refused("--cluster=" + dir.file("typo.pbtxt"), "typo.pbtxt:4:");
}

TEST_CASE("purine simulate refuses an impossible layout, a file that is no trace, a bad --map-by",
          "[cli][simulate]") {
  TempDir dir;
  std::ofstream(dir.file("small.pbtxt"))
      << "nodes { cores: 1 ranks_per_node: 1 cpu { peak_gflops: 1 memory_gigabytes_per_second: "
         "1 } host_memory { latency_us: 1 gigabytes_per_second: 1 } }\n";
  std::ofstream(dir.file("no_trace.json")) << "{\"not\": 1}\n";
  check_refused("--cluster=" + dir.file("small.pbtxt") + " --ranks=2",
                "impossible layout: 2 ranks");
  check_refused("--calibrate=" + dir.file("no_trace.json") + " --scaling=1,2",
                "is not a Chrome trace");
  check_refused("--map-by=socket", "--map-by must be slot or node, got 'socket'");
}

TEST_CASE("purine simulate --rank-speed slows the ranks' computation and says so",
          "[cli][simulate]") {
  const CommandResult r = run_purine(kLayout + "--ranks=2 --rank-speed=2:0.8");
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("CPU ops 25.0% slower than one rank alone") &&
                           Contains("(rank speed 0.800)"));
  check_refused("--rank-speed=2-0.8", "--rank-speed: '2-0.8' is not RANKS:SPEED");
}
