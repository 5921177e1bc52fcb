// SpawnedProcess: a shell command started in the background (output to a file), to be killed
// with SIGKILL in the middle of its work, as a crash would end it: the command and every
// process below it (mpirun's ranks live in process groups of their own, so a group kill would
// miss them). Shared by the CLI tests that crash a training run and resume it.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>

namespace purine::testing {

class SpawnedProcess {
 public:
  SpawnedProcess(const std::string& command, const std::string& output_file) {
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      const std::string line = "exec " + command + " >" + output_file + " 2>&1";
      ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~SpawnedProcess() {
    if (pid_ > 0) kill_all();
  }
  SpawnedProcess(const SpawnedProcess&) = delete;
  SpawnedProcess& operator=(const SpawnedProcess&) = delete;

  // Whether the command still runs (false once it exited; it is reaped then).
  bool running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == 0) return true;
    exit_status_ = status;
    pid_ = -1;
    return false;
  }

  // SIGKILL to the command and every process below it, at once; returns when all are dead
  // (the command reaped; the others, which mpirun's death hands to init, gone or zombies).
  // Returns the command's wait status.
  int kill_all() {
    std::set<pid_t> tree = descendants(pid_);
    if (pid_ > 0) tree.insert(pid_);
    for (pid_t p : tree) ::kill(p, SIGKILL);
    if (pid_ > 0) {
      ::waitpid(pid_, &exit_status_, 0);
      tree.erase(pid_);
      pid_ = -1;
    }
    for (int tries = 0; tries < 500; ++tries) {
      bool alive = false;
      for (pid_t p : tree) alive |= state_of(p) != 'Z' && state_of(p) != '\0';
      if (!alive) break;
      ::usleep(10000);
    }
    return exit_status_;
  }

 private:
  // From /proc/<pid>/stat, "pid (comm) state ppid ...": comm may hold spaces, so read after
  // the last ')'. State '\0' and parent -1 when the process is gone.
  static std::pair<char, pid_t> stat_of(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string content((std::istreambuf_iterator<char>(stat)), {});
    const size_t close = content.rfind(')');
    if (close == std::string::npos) return {'\0', -1};
    std::istringstream rest(content.substr(close + 1));
    char state = '\0';
    pid_t ppid = -1;
    rest >> state >> ppid;
    return {state, ppid};
  }
  static char state_of(pid_t pid) { return stat_of(pid).first; }
  static pid_t parent_of(pid_t pid) { return stat_of(pid).second; }
  static std::set<pid_t> all_pids() {
    std::set<pid_t> pids;
    DIR* proc = ::opendir("/proc");
    if (!proc) return pids;
    while (dirent* e = ::readdir(proc)) {
      const pid_t p = static_cast<pid_t>(std::atoi(e->d_name));
      if (p > 0) pids.insert(p);
    }
    ::closedir(proc);
    return pids;
  }
  static std::set<pid_t> descendants(pid_t root) {
    if (root <= 0) return {};
    return descendants_of_any({root});
  }
  static std::set<pid_t> descendants_of_any(const std::set<pid_t>& roots) {
    std::set<pid_t> found;
    std::set<pid_t> frontier = roots;
    const std::set<pid_t> pids = all_pids();
    while (!frontier.empty()) {
      std::set<pid_t> next;
      for (pid_t p : pids)
        if (!found.count(p) && !roots.count(p) && frontier.count(parent_of(p))) next.insert(p);
      found.insert(next.begin(), next.end());
      frontier = next;
    }
    return found;
  }

  pid_t pid_ = -1;
  int exit_status_ = 0;
};

}  // namespace purine::testing
