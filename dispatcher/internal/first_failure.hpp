// FirstFailure keeps the first exception a run raised, as the message Engine::sync() rethrows:
// "task <name>: <what>". Later failures of the same run are dropped. Thread-safe: record() may be
// called from any executor thread; failed() is a cheap atomic read.
#pragma once

#include <atomic>
#include <exception>
#include <string>

#include "dispatcher/internal/mutex.hpp"

namespace purine::dispatch {

class FirstFailure {
 public:
  // Returns true when this was the first failure of the run.
  bool record(const std::string& task_name, std::exception_ptr error) EXCLUDES(mu_);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  std::string message() const EXCLUDES(mu_);
  // Between runs only.
  void reset() EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::string message_ GUARDED_BY(mu_);
  std::atomic<bool> failed_{false};
};

// The what() of an exception_ptr, or a placeholder for exceptions not derived from std::exception.
std::string describe(std::exception_ptr error);

}  // namespace purine::dispatch
