// `mpirun -n N purine train --parallel=data`, launched by this ordinary (non-MPI) test process
// with N from PURINE_MPI_RANKS: training writes a summary that counts every rank, and a bad flag
// or a missing --parallel=data gives a non-zero exit from mpirun and whole `error: rank R: ...`
// lines (at most one per rank, at least one: MPI_Abort may end the others before they print).
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "fashion_mnist.hpp"
#include "run_command.hpp"
#include "temp_dir.hpp"

namespace {

using Result = purine::testing::CommandResult;  // output: mpirun's and every rank's

std::string env(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

int ranks() { return std::atoi(env("PURINE_MPI_RANKS", "2").c_str()); }

Result mpirun(const std::string& args) {
  return purine::testing::run_command(env("PURINE_MPIEXEC", "mpiexec") + " -n " +
                                      std::to_string(ranks()) +
                                      " --oversubscribe --allow-run-as-root " +
                                      env("PURINE_CLI", "build/tools/purine") + " " + args);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A failed job: non-zero exit, and `expected` in an error line.
void check_failed(const Result& r, const std::string& expected) {
  INFO("mpirun output:\n" << r.output);
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Catch::Contains("error: ") && Catch::Contains(expected));
}

// The `error:` lines of a failed job are whole lines, `error: rank R: <expected>`, at most one
// per rank and at least one.
void check_error_lines(const Result& r, const std::string& expected) {
  INFO("mpirun output:\n" << r.output);
  std::istringstream lines(r.output);
  std::string line;
  std::set<int> reported;
  int error_lines = 0;
  const std::regex pattern("^error: rank ([0-9]+): (.*)$");
  while (std::getline(lines, line)) {
    if (line.find("error:") == std::string::npos) continue;
    ++error_lines;
    std::smatch m;
    CHECK(std::regex_match(line, m, pattern));
    if (m.empty()) continue;
    const int rank = std::stoi(m[1]);
    CHECK(rank < ranks());
    CHECK(reported.insert(rank).second);  // one line per rank
    CHECK_THAT(line, Catch::Contains(expected));
  }
  CHECK(error_lines >= 1);
  CHECK(error_lines <= ranks());
}

const char kBadFlag[] = "train --parallel=data --model=mlp --max-iters=1 --reduce=bogus";
const char kBadFlagError[] = "unknown reduction 'bogus'";
const char kNoParallel[] = "train --model=mlp --max-iters=1";
std::string no_parallel_error() {
  return "running on " + std::to_string(ranks()) + " MPI ranks needs --parallel=data";
}

}  // namespace

namespace {

// A data-parallel mlp job that must succeed: what it printed and its summary JSON.
struct Job {
  std::string output;
  std::string summary;
};
Job run_job(const std::string& flags) {
  purine::testing::TempDir dir;
  const std::string summary = dir.file("summary.json");
  Result r = mpirun(
      "train --parallel=data --model=mlp --batch=16 --threads=1 --noevaluate "
      "--stall-timeout=20 " +
      flags + " --summary=" + summary);
  INFO("mpirun output:\n" << r.output);
  REQUIRE(r.status == 0);
  return {r.output, read_file(summary)};
}

}  // namespace

TEST_CASE("mpirun purine train --parallel=data writes a summary counting every rank",
          "[mpi][cli]") {
  if (!purine::testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  const Job job = run_job("--max-iters=30 --reduce=ring --bucket-kb=64");
  INFO("summary:\n" << job.summary);
  CHECK_THAT(job.summary, Catch::Contains("\"ranks\": " + std::to_string(ranks()) + ",") &&
                              Catch::Contains("\"iterations\": 30,") &&
                              Catch::Contains("\"reduce\": \"ring\"") &&
                              Catch::Contains("\"bucket_kb\": 64,") &&
                              Catch::Contains("\"batch\": 16,"));
  std::smatch m;
  REQUIRE(std::regex_search(job.summary, m, std::regex("\"final_loss\": ([0-9.eE+-]+)")));
  const double loss = std::stod(m[1]);
  CHECK(loss > 0);
  CHECK(loss < 2.5);  // ln(10) = 2.30 at the start
  // Only rank 0 reports.
  CHECK(job.output.find("training mlp: batch 16 x " + std::to_string(ranks()) + " ranks,") !=
        std::string::npos);

  // Two replicas per rank, each at its own CPU location.
  const Job located = run_job("--max-iters=20 --reduce=ps --locations=2");
  INFO("summary:\n" << located.summary);
  CHECK_THAT(located.summary,
             Catch::Contains("\"locations\": 2,") && Catch::Contains("\"iterations\": 20,"));
  CHECK_THAT(located.output, Catch::Contains("training mlp: batch 16 x " + std::to_string(ranks()) +
                                             " ranks (2 locations each)"));
}

TEST_CASE("a data-parallel run resumed from its checkpoint ends where an unbroken one does",
          "[mpi][cli]") {
  if (!purine::testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  purine::testing::TempDir dir;
  const std::string common =
      "train --parallel=data --model=mlp --batch=16 --threads=1 --noevaluate --reduce=ring "
      "--lr-policy=step --lr-step=5 --stall-timeout=20 ";
  auto final_loss = [](const std::string& summary) {
    std::smatch m;
    const std::string json = read_file(summary);
    REQUIRE(std::regex_search(json, m, std::regex("\"final_loss\": ([0-9.eE+-]+)")));
    return m[1].str();
  };
  Result whole = mpirun(common + "--max-iters=16 --summary=" + dir.file("whole.json"));
  INFO("mpirun output:\n" << whole.output);
  REQUIRE(whole.status == 0);
  Result first = mpirun(common + "--max-iters=7 --checkpoint=" + dir.file("ckpt"));
  INFO("mpirun output:\n" << first.output);
  REQUIRE(first.status == 0);
  for (int r = 0; r < ranks(); ++r) {
    struct stat st;
    CHECK(stat(dir.file("ckpt.rank" + std::to_string(r)).c_str(), &st) == 0);
  }
  Result rest = mpirun(common + "--max-iters=16 --resume=" + dir.file("ckpt") +
                       " --summary=" + dir.file("rest.json"));
  INFO("mpirun output:\n" << rest.output);
  REQUIRE(rest.status == 0);
  CHECK(final_loss(dir.file("rest.json")) == final_loss(dir.file("whole.json")));

  // Rank 0 handed rank 1's file: refused, naming both.
  std::filesystem::copy_file(dir.file("ckpt.rank1"), dir.file("swapped.rank0"));
  for (int r = 1; r < ranks(); ++r)
    std::filesystem::copy_file(dir.file("ckpt.rank" + std::to_string(r)),
                               dir.file("swapped.rank" + std::to_string(r)));
  check_failed(
      mpirun(common + "--max-iters=16 --resume=" + dir.file("swapped")),
      "holds rank 1 of a run on " + std::to_string(ranks()) + " processes; this is rank 0");
  // Other buckets hold other optimizer state: refused, naming both settings.
  check_failed(mpirun(common + "--max-iters=16 --bucket-kb=0 --resume=" + dir.file("ckpt")),
               "was saved with --reduce=ring --bucket-kb=256; this run has --reduce=ring "
               "--bucket-kb=0");
}

TEST_CASE("mpirun purine train with a bad flag value fails with an error", "[mpi][cli]") {
  check_failed(mpirun(kBadFlag), kBadFlagError);
}

TEST_CASE("mpirun purine train without --parallel=data fails with an error", "[mpi][cli]") {
  check_failed(mpirun(kNoParallel), no_parallel_error());
}

TEST_CASE("failing ranks print whole error lines, one per rank at most", "[mpi][cli]") {
  for (int attempt = 0; attempt < 3; ++attempt) {
    check_error_lines(mpirun(kBadFlag), kBadFlagError);
    check_error_lines(mpirun(kNoParallel), no_parallel_error());
  }
}
