#include "dispatcher/internal/first_failure.hpp"

#include <stdexcept>

#include "base/error.hpp"

namespace purine::dispatch {

std::string describe(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception (not derived from std::exception)";
  }
}

bool FirstFailure::record(const std::string& task_name, std::exception_ptr error) {
  std::string text = str("task ", task_name, ": ", describe(error));
  MutexLock lock(&mu_);
  if (failed_.load(std::memory_order_relaxed)) return false;
  message_ = std::move(text);
  failed_.store(true, std::memory_order_release);
  return true;
}

std::string FirstFailure::message() const {
  MutexLock lock(&mu_);
  return message_;
}

void FirstFailure::reset() {
  MutexLock lock(&mu_);
  message_.clear();
  failed_.store(false, std::memory_order_relaxed);
}

}  // namespace purine::dispatch
