// `mpirun -n N purine train --parallel=data`, launched by this ordinary (non-MPI) test process
// with N from PURINE_MPI_RANKS: training writes a summary that counts every rank. An error every
// rank meets alike before any communication (a bad flag, a missing --parallel=data) is told once,
// `error: <message>`, without MPI_Abort's banner, and mpirun exits non-zero; an error of a rank's
// own (a missing file) gives whole `error: rank R: ...` lines (at most one per rank, at least one:
// MPI_Abort may end the others before they print).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fashion_mnist.hpp"
#include "run_command.hpp"
#include "spawned_process.hpp"
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

// An error of the flags, told once: exactly one `error:` line, without a rank (it is every
// rank's), and no MPI_Abort banner (mpirun still reports the non-zero exit status in its own
// words).
void check_told_once(const Result& r, const std::string& expected) {
  INFO("mpirun output:\n" << r.output);
  CHECK(r.status != 0);
  std::istringstream lines(r.output);
  std::string line;
  std::vector<std::string> errors;
  while (std::getline(lines, line))
    if (line.find("error:") != std::string::npos) errors.push_back(line);
  REQUIRE(errors.size() == 1);
  CHECK(errors[0] == "error: " + expected);
  CHECK_THAT(r.output, !Catch::Contains("MPI_ABORT") &&
                           !Catch::Contains("mpirun has exited due to process rank") &&
                           !Catch::Contains("rank 0:"));
}

const char kBadFlag[] = "train --parallel=data --model=mlp --max-iters=1 --reduce=bogus";
const char kBadFlagError[] = "unknown reduction 'bogus' for --reduce; choose ring, ps, mpi or nccl";
const char kNoParallel[] = "train --model=mlp --max-iters=1";
std::string no_parallel_error() {
  return "running on " + std::to_string(ranks()) +
         " MPI ranks needs --parallel=data, pipeline, model or hybrid";
}
// Missing on this machine, so on every rank, but found by each rank on its own, once training
// runs: an error of the ranks' own, not of the flags.
const char kMissingData[] =
    "train --parallel=data --model=mlp --max-iters=1 --threads=1 --data=/nonexistent/dir";
const char kMissingDataError[] = "no such file: /nonexistent/dir/train-images-idx3-ubyte.gz";

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

namespace {

Result mpirun_n(int n, const std::string& args) {
  return purine::testing::run_command(env("PURINE_MPIEXEC", "mpiexec") + " -n " +
                                      std::to_string(n) + " --oversubscribe --allow-run-as-root " +
                                      env("PURINE_CLI", "build/tools/purine") + " " + args);
}

// The checkpoints in `dir` (train/checkpoint_dir.hpp names them), newest first; this test
// program does not link the library.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  if (!std::filesystem::is_directory(dir)) return found;
  const std::regex name("ckpt-([0-9]+)\\.purine");
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::smatch m;
    const std::string file = entry.path().filename().string();
    if (std::regex_match(file, m, name)) found.emplace_back(std::stoll(m[1]), entry.path());
  }
  std::sort(found.rbegin(), found.rend());
  return found;
}

double final_loss_of(const std::string& summary) {
  std::smatch m;
  const std::string json = read_file(summary);
  INFO(summary << ":\n" << json);
  REQUIRE(std::regex_search(json, m, std::regex("\"final_loss\": ([0-9.eE+-]+)")));
  return std::stod(m[1]);
}

// A step schedule: an iteration's rate does not depend on the run's total.
const char kCommon[] =
    "train --parallel=data --model=mlp --threads=1 --noevaluate --lr-policy=step --lr-step=5 "
    "--stall-timeout=20 ";

}  // namespace

TEST_CASE("a data-parallel run killed with SIGKILL resumes to the unbroken loss", "[mpi][cli]") {
  if (!purine::testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  purine::testing::TempDir dir;
  const std::string ckpts = dir.file("ckpts");
  const std::string common = std::string(kCommon) + "--batch=16 --reduce=ring ";
  {
    purine::testing::SpawnedProcess job(
        env("PURINE_MPIEXEC", "mpiexec") + " -n " + std::to_string(ranks()) +
            " --oversubscribe --allow-run-as-root " + env("PURINE_CLI", "build/tools/purine") +
            " " + common + "--max-iters=1000000 --checkpoint-every=5 --keep=1000 " +
            "--checkpoint-dir=" + ckpts,
        dir.file("killed.log"));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (job.running() && std::chrono::steady_clock::now() < deadline &&
           list_checkpoints(ckpts).empty())
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    INFO(read_file(dir.file("killed.log")));
    REQUIRE(job.running());  // the kill comes mid-run
    job.kill_all();
  }
  const auto checkpoints = list_checkpoints(ckpts);
  REQUIRE(!checkpoints.empty());
  const std::string total = std::to_string(checkpoints.front().first + 12);
  INFO("killed after iteration " << checkpoints.front().first);
  Result resumed = mpirun(common + "--max-iters=" + total + " --checkpoint-dir=" + ckpts +
                          " --resume --summary=" + dir.file("resumed.json"));
  INFO("mpirun output:\n" << resumed.output);
  REQUIRE(resumed.status == 0);
  // Without --resume every rank refuses the directory (rank 0 looks), none waits for another.
  check_failed(mpirun(common + "--max-iters=" + total + " --checkpoint-dir=" + ckpts),
               "already holds the checkpoints of a run");
  Result whole = mpirun(common + "--max-iters=" + total + " --summary=" + dir.file("whole.json"));
  INFO("mpirun output:\n" << whole.output);
  REQUIRE(whole.status == 0);
  CHECK(final_loss_of(dir.file("resumed.json")) == final_loss_of(dir.file("whole.json")));
}

// The process of rank `rank` whose command line contains `marker`, or 0.
pid_t rank_process(int rank, const std::string& marker) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = read_file(entry.path().string() + "/cmdline");
    std::string environ = read_file(entry.path().string() + "/environ");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    std::replace(environ.begin(), environ.end(), '\0', '\n');
    if (cmdline.find(marker) != std::string::npos && cmdline.rfind("mpi", 0) != 0 &&
        environ.find("\nOMPI_COMM_WORLD_RANK=" + std::to_string(rank) + "\n") != std::string::npos)
      return static_cast<pid_t>(std::stol(name));
  }
  return 0;
}

TEST_CASE("SIGINT to one rank stops every rank after the same iteration, with one checkpoint",
          "[mpi][cli][signal]") {
  purine::testing::TempDir dir;
  const std::string ckpts = dir.file("ckpts");
  const std::string log = dir.file("stopped.log");
  const std::string common = std::string(kCommon) +
                             "--data=synthetic:1x28x28:10 --batch=8 --epochs=100000 "
                             "--checkpoint-dir=" +
                             ckpts;
  {
    // The ranks inherit SIGINT's action: the default, even where this test runs as a background
    // job (which ignores SIGINT).
    void (*previous)(int) = ::signal(SIGINT, SIG_DFL);
    purine::testing::SpawnedProcess job(
        "sh -c '" + env("PURINE_MPIEXEC", "mpiexec") + " -n " + std::to_string(ranks()) +
            " --oversubscribe --allow-run-as-root " + env("PURINE_CLI", "build/tools/purine") +
            " " + common + " --max-iters=100000000; echo mpirun exit status $?'",
        log);
    ::signal(SIGINT, previous);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (job.running() && std::chrono::steady_clock::now() < deadline &&
           read_file(log).find("iter 100/") == std::string::npos)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    INFO(read_file(log));
    REQUIRE(job.running());
    const pid_t last_rank = rank_process(ranks() - 1, ckpts);
    REQUIRE(last_rank > 0);
    REQUIRE(::kill(last_rank, SIGINT) == 0);  // not rank 0: the ranks agree
    while (job.running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    REQUIRE(!job.running());
  }
  const std::string output = read_file(log);
  INFO(output);
  CHECK(output.find("mpirun exit status 130") != std::string::npos);
  std::smatch m;
  REQUIRE(std::regex_search(output, m,
                            std::regex("stopped by SIGINT at iteration ([0-9]+); checkpoint "
                                       "written to (.*); resume with --resume\n")));
  CHECK(output.find("stopped by", m.position(0) + 1) == std::string::npos);  // rank 0 says it
  const auto checkpoints = list_checkpoints(ckpts);
  REQUIRE(checkpoints.size() == 1);
  CHECK(checkpoints.front().first == std::stoll(m[1]));
  CHECK(checkpoints.front().second == m[2].str());
  Result resumed =
      mpirun(common + " --resume --max-iters=" + std::to_string(checkpoints.front().first + 3));
  INFO("mpirun output:\n" << resumed.output);
  CHECK(resumed.status == 0);
  CHECK(resumed.output.find("resuming from " + m[2].str()) != std::string::npos);
}

TEST_CASE("a checkpoint saved by 2 ranks with the ring resumes in any layout", "[mpi][cli]") {
  if (!purine::testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  if (ranks() != 2) return;  // the layouts below fix their own rank counts: run them once
  purine::testing::TempDir dir;
  // 48 images per step in every layout; --bucket-kb=0 shards every momentum over the ranks.
  Result saved = mpirun_n(2, std::string(kCommon) +
                                 "--batch=24 --reduce=ring --bucket-kb=0 --max-iters=7 "
                                 "--checkpoint=" +
                                 dir.file("ckpt"));
  INFO("mpirun output:\n" << saved.output);
  REQUIRE(saved.status == 0);
  struct Layout {
    int ranks;
    std::string flags;
  };
  for (const Layout& l :
       {Layout{2, "--batch=24 --reduce=ring --bucket-kb=0"}, Layout{1, "--batch=48"},
        Layout{3, "--batch=16 --reduce=ring"}, Layout{2, "--batch=24 --reduce=ps"},
        Layout{1, "--batch=48 --locations=2 --reduce=ring --bucket-kb=0"}}) {
    INFO(l.ranks << " ranks, " << l.flags);
    const std::string flags = std::string(kCommon) + l.flags + " --max-iters=16 ";
    Result whole = mpirun_n(l.ranks, flags + "--summary=" + dir.file("whole.json"));
    INFO("mpirun output:\n" << whole.output);
    REQUIRE(whole.status == 0);
    Result resumed = mpirun_n(l.ranks, flags + "--resume-from=" + dir.file("ckpt") +
                                           " --summary=" + dir.file("resumed.json"));
    INFO("mpirun output:\n" << resumed.output);
    REQUIRE(resumed.status == 0);
    CHECK_THAT(read_file(dir.file("resumed.json")), Catch::Contains("\"iterations\": 9,"));
    const double expected = final_loss_of(dir.file("whole.json"));
    const double loss = final_loss_of(dir.file("resumed.json"));
    INFO("unbroken " << expected << ", resumed " << loss);
    CHECK(std::abs(loss - expected) / expected < 1e-5);
    if (l.ranks == 2 && l.flags.find("ring") != std::string::npos) CHECK(loss == expected);
  }
}

TEST_CASE("checkpoint errors on several ranks end every rank with the error", "[mpi][cli]") {
  if (!purine::testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  // Rank 0 fails to write (a full disk) or to read (no file) inside a collective: every rank
  // learns it, no rank waits.
  const std::string common = std::string(kCommon) + "--batch=16 --max-iters=3 ";
  check_failed(mpirun(common + "--checkpoint=/dev/full"),
               "cannot save the checkpoint: failed writing '/dev/full'");
  check_failed(mpirun(common + "--resume-from=/nonexistent/ckpt"),
               "cannot read checkpoint '/nonexistent/ckpt'");
  check_failed(mpirun(common + "--resume-from=/dev/zero"), "is not a Purine checkpoint");
}

TEST_CASE(
    "mpirun purine train reports a pipeline's bubble: every rank's stage, or rank 0's replica",
    "[mpi][cli][pipeline]") {
  if (!purine::testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  const int n = ranks();
  const Result r = mpirun("train --model=mlp --parallel=pipeline --stages=" + std::to_string(n) +
                          " --micro-batches=4 --max-iters=12 --noevaluate --threads=1");
  INFO("mpirun output:\n" << r.output);
  CHECK(r.status == 0);
  // Rank 0 prints it once, with a busy share for each rank's stage, none of them zero.
  std::smatch m;
  const std::regex line("pipeline of " + std::to_string(n) +
                        " stages, 4 micro-batches \\(1f1b\\): bubble 0\\.[0-9]+ \\([0-9.]+ in "
                        "theory for equal stages\\); stages busy ([0-9. /]+) of the time");
  REQUIRE(std::regex_search(r.output, m, line));
  const std::string shares = m[1];
  CHECK(std::count(shares.begin(), shares.end(), '/') == n - 1);
  CHECK(shares.find(" 0.00") == std::string::npos);
  CHECK(shares.rfind("0.00", 0) != 0);
  CHECK(r.output.find("pipeline of", m.position(0) + 1) == std::string::npos);
  // Data parallelism over pipelines: rank 0 reports its replica's stages.
  const Result hybrid = mpirun(
      "train --model=mlp --parallel=hybrid --stages=3 --micro-batches=4 --max-iters=12 "
      "--noevaluate --threads=1");
  INFO("hybrid mpirun output:\n" << hybrid.output);
  CHECK(hybrid.status == 0);
  const std::string report = "rank 0's pipeline of 3 stages, 4 micro-batches (1f1b): bubble 0.";
  const size_t at = hybrid.output.find(report);
  CHECK(at != std::string::npos);
  CHECK(hybrid.output.find("pipeline of", at + report.size()) == std::string::npos);
}

TEST_CASE("mpirun purine train with a bad flag value fails with an error", "[mpi][cli]") {
  check_failed(mpirun(kBadFlag), kBadFlagError);
}

TEST_CASE("mpirun purine train without --parallel=data fails with an error", "[mpi][cli]") {
  check_failed(mpirun(kNoParallel), no_parallel_error());
}

// Every rank used to print the error of a bad flag, or of a config file, inside MPI_Abort's
// banner, and its help (regression).
TEST_CASE("a bad flag under mpirun is told once, without the abort banner", "[mpi][cli]") {
  for (int attempt = 0; attempt < 2; ++attempt) {
    check_told_once(mpirun(kBadFlag), kBadFlagError);
    check_told_once(mpirun(kNoParallel), no_parallel_error());
  }
  check_told_once(mpirun("train --max-iter=5"),
                  "unknown flag --max-iter for purine train; did you mean --max-iters? (purine "
                  "train --help lists its flags)");
  check_told_once(mpirun("train --batch=abc"), "--batch takes an integer, got 'abc'");
  check_told_once(mpirun("train --parallel=data --lr"), "--lr needs a value: give --lr=VALUE");
  check_told_once(mpirun("train --resume=ckpt"),
                  "--resume takes no file (it continues from the newest checkpoint in "
                  "--checkpoint-dir); for a file use --resume-from=ckpt");
  check_told_once(mpirun("train --parallel=data extra"), "unexpected argument 'extra'");
  // The config file is the same on every rank too.
  check_told_once(mpirun("train --config=/nonexistent/run.pbtxt"),
                  "--config=/nonexistent/run.pbtxt: cannot open it");
  // Help, too, is printed once.
  const Result help = mpirun("train --help");
  CHECK(help.status == 0);
  const std::string usage = "usage: purine train";
  const size_t first = help.output.find(usage);
  CHECK(first != std::string::npos);
  CHECK(help.output.find(usage, first + 1) == std::string::npos);
}

TEST_CASE("failing ranks print whole error lines, one per rank at most", "[mpi][cli]") {
  for (int attempt = 0; attempt < 3; ++attempt) {
    const Result r = mpirun(kMissingData);
    check_failed(r, kMissingDataError);
    check_error_lines(r, kMissingDataError);
  }
}

// A library program under mpirun that never initializes MPI, or builds its TrainOptions before
// the MpiContext, used to train one independent copy per rank with exit status 0 (regression):
// now it fails, naming the fix; with the MpiContext first it trains.
TEST_CASE("a library program under mpirun without its MpiContext first fails, naming the fix",
          "[mpi][cli]") {
  auto run = [](const std::string& how) {
    return purine::testing::run_command(
        env("PURINE_MPIEXEC", "mpiexec") + " -n " + std::to_string(ranks()) +
        " --oversubscribe --allow-run-as-root " +
        env("PURINE_MPI_TRAINER", "build/tests/mpi_trainer_program") + " " + how);
  };
  const std::string fix =
      "create a purine::MpiContext first thing in main() (purine/mpi.hpp), before building "
      "TrainOptions or RunOptions";
  const Result missing = run("no-context");
  check_failed(missing, "but never initialized MPI, so every rank would run graph");
  CHECK_THAT(missing.output, Catch::Contains(fix) && !Catch::Contains(" trained"));
  const Result late = run("late");
  check_failed(late, "this process is rank 1 of " + std::to_string(ranks()) +
                         " MPI ranks, but graph 'train' is run as rank 0 of 1: " + fix);
  const Result first = run("first");
  INFO(first.output);
  CHECK(first.status == 0);
  for (int r = 0; r < ranks(); ++r)
    CHECK_THAT(first.output, Catch::Contains("rank " + std::to_string(r) + " of " +
                                             std::to_string(ranks()) + " trained"));
}

// Unbound ranks of one machine each see every core, so each one's threads fit, but all of them
// together do not: the warning counts the machine's ranks (OMPI_COMM_WORLD_LOCAL_SIZE).
TEST_CASE("unbound ranks whose threads together outnumber the cores get a warning", "[mpi][cli]") {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const Result r = purine::testing::run_command(
      env("PURINE_MPIEXEC", "mpiexec") + " -n " + std::to_string(ranks()) +
      " --oversubscribe --allow-run-as-root --bind-to none " +
      env("PURINE_CLI", "build/tools/purine") + " train --threads=" + std::to_string(cores) +
      " --parallel=data --data=/nonexistent/dir");
  INFO(r.output);
  CHECK(r.status != 0);  // the missing data ends the run after the warning
  CHECK_THAT(r.output, Catch::Contains("warning: " + std::to_string(ranks()) +
                                       " ranks on this machine with --threads=" +
                                       std::to_string(cores) + " run ") &&
                           Catch::Contains("; they will take turns, many times slower: give "
                                           "--threads=" +
                                           std::to_string(std::max<long>(1, cores / ranks()))));
}
