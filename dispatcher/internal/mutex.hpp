// Mutex, MutexLock and CondVar: thin wrappers over std::mutex and std::condition_variable that
// carry the clang thread-safety annotations (dispatcher/internal/thread_annotations.hpp), so that
// GUARDED_BY / REQUIRES on dispatcher members are checked by clang -Wthread-safety. Same
// semantics and cost as the std types. A CondVar is bound to one Mutex for its lifetime and must
// be waited on with that Mutex held.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "dispatcher/internal/thread_annotations.hpp"

namespace purine::dispatch {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for the lifetime of the scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->lock(); }
  ~MutexLock() RELEASE() { mu_->unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class CondVar {
 public:
  explicit CondVar(Mutex* mu) : mu_(mu) {}
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Both wait calls need mu_ held; they release it while blocked and hold it again on return.
  // Spurious wake-ups happen: callers re-check their condition in a loop.
  void wait() {
    std::unique_lock<std::mutex> lock(mu_->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // Returns false when the timeout expired.
  template <typename Rep, typename Period>
  bool wait_for(std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock<std::mutex> lock(mu_->mu_, std::adopt_lock);
    const bool signalled = cv_.wait_for(lock, timeout) == std::cv_status::no_timeout;
    lock.release();
    return signalled;
  }
  void signal() { cv_.notify_one(); }
  void signal_all() { cv_.notify_all(); }

 private:
  Mutex* const mu_;
  std::condition_variable cv_;
};

}  // namespace purine::dispatch
