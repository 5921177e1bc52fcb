// `purine train` stopped by SIGINT or SIGTERM: it finishes the iteration, writes its checkpoint,
// says where, and exits with 128 + the signal; the checkpoint resumes.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "purine_cli.hpp"
#include "temp_dir.hpp"
#include "train/checkpoint_dir.hpp"

namespace {

using purine::testing::purine_binary;
using purine::testing::read_file;

// `purine train` with `args` in a child process, its output into `log`. The child gets the
// default actions of SIGINT and SIGTERM whatever this process has (a background job ignores
// SIGINT, and so would its children).
class TrainProcess {
 public:
  TrainProcess(const std::vector<std::string>& args, const std::string& log) {
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0) ::_exit(127);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      const std::string binary = purine_binary();
      std::vector<char*> argv{const_cast<char*>(binary.c_str()), const_cast<char*>("train")};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(binary.c_str(), argv.data());
      ::_exit(127);
    }
  }
  ~TrainProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  TrainProcess(const TrainProcess&) = delete;
  TrainProcess& operator=(const TrainProcess&) = delete;

  // Waits until `log` contains `text` (true), or the process ended or a minute passed (false).
  bool wait_for(const std::string& log, const std::string& text) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      if (read_file(log).find(text) != std::string::npos) return true;
      if (::waitpid(pid_, &status_, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }
  // Sends `signal` and returns the wait status.
  int stop(int signal) {
    REQUIRE(pid_ > 0);
    ::kill(pid_, signal);
    ::waitpid(pid_, &status_, 0);
    pid_ = -1;
    return status_;
  }

 private:
  pid_t pid_ = -1;
  int status_ = 0;
};

// A run that would take hours: synthetic images, a fixed rate, progress every 100 iterations.
std::vector<std::string> long_run(const std::vector<std::string>& more) {
  std::vector<std::string> args{
      "--model=mlp",  "--data=synthetic:1x28x28:10", "--batch=8",       "--threads=1",
      "--noevaluate", "--lr-policy=fixed",           "--epochs=100000", "--max-iters=100000000"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

}  // namespace

using Catch::Contains;

TEST_CASE("SIGINT stops purine train with a checkpoint that resumes, exit status 130",
          "[cli][signal][checkpoint]") {
  purine::testing::TempDir temp;
  const std::string dir = temp.file("ckpts");
  const std::string log = temp.file("train.log");
  TrainProcess run(long_run({"--checkpoint-dir=" + dir}), log);
  REQUIRE(run.wait_for(log, "iter 100/"));
  const int status = run.stop(SIGINT);
  const std::string output = read_file(log);
  INFO(output);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  std::smatch m;
  REQUIRE(std::regex_search(output, m,
                            std::regex("stopped by SIGINT at iteration ([0-9]+); checkpoint "
                                       "written to (.*); resume with --resume\n")));
  const int64_t iteration = std::stoll(m[1].str());
  CHECK(iteration >= 100);
  // Named as README.md and --help say: DIR/ckpt-<iteration in 10 digits>.purine.
  CHECK(m[2].str() == purine::checkpoint_file(dir, iteration));
  CHECK(std::regex_search(m[2].str(), std::regex("/ckpt-[0-9]{10}\\.purine$")));
  REQUIRE(std::filesystem::exists(m[2].str()));
  REQUIRE(purine::list_checkpoints(dir).front().second == m[2].str());

  const purine::testing::CommandResult resumed = purine::testing::run_command(
      purine_binary() + " train --model=mlp --data=synthetic:1x28x28:10 --batch=8 --threads=1 " +
      "--noevaluate --lr-policy=fixed --epochs=100000 --max-iters=" +
      std::to_string(iteration + 5) + " --checkpoint-dir=" + dir + " --resume");
  INFO(resumed.output);
  CHECK(resumed.status == 0);
  CHECK_THAT(resumed.output, Contains("resuming from " + m[2].str()));
  CHECK_THAT(resumed.output, Contains("(5 iterations"));
}

TEST_CASE("SIGTERM stops purine train with exit status 143, --checkpoint is written too",
          "[cli][signal][checkpoint]") {
  purine::testing::TempDir temp;
  const std::string log = temp.file("train.log");
  SECTION("with --checkpoint") {
    const std::string file = temp.file("one.ckpt");
    TrainProcess run(long_run({"--checkpoint=" + file}), log);
    REQUIRE(run.wait_for(log, "iter 100/"));
    const int status = run.stop(SIGTERM);
    INFO(read_file(log));
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 143);
    CHECK_THAT(read_file(log),
               Contains("; checkpoint written to " + file + "; resume with --resume\n"));
    CHECK(std::filesystem::file_size(file) > 0);
  }
  SECTION("without checkpoint options it says none was written") {
    TrainProcess run(long_run({}), log);
    REQUIRE(run.wait_for(log, "iter 100/"));
    const int status = run.stop(SIGTERM);
    INFO(read_file(log));
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 143);
    CHECK_THAT(read_file(log),
               Contains("stopped by SIGTERM at iteration ") && Contains("; no checkpoint written"));
  }
}
