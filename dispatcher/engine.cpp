// Engine: wires the Schedule, the task table (EngineCore) and the executors together and
// implements the run protocol, stall detection and the shutdown policy.
//
// Shutdown policy. Normally the destructor waits for a run still in progress, asks every executor
// thread to stop and joins it. After a stall (sync() threw, or the destructor itself saw the run
// stall) the run is cancelled: threads that are between tasks skip what is left and exit; the
// destructor waits up to kAbandonGrace for them and joins them. A thread still inside a task's
// run() or poll() at that point is marked abandoned and detached, so destroying a stalled engine
// never hangs. The detached thread keeps the EngineCore (plan, closures, queues) alive through its
// shared_ptr; if its task ever returns, the thread exits at once without calling observers or
// running anything else, and the core is freed with it. What the stuck task itself touches is
// the task's business. A stalled engine refuses further runs.

#include "dispatcher/engine.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <thread>
#include <utility>

#include "base/error.hpp"
#include "dispatcher/internal/engine_core.hpp"
#include "dispatcher/internal/serial_runner.hpp"
#include "dispatcher/internal/thread_executor.hpp"

namespace purine::dispatch {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
constexpr milliseconds kAbandonGrace{200};

}  // namespace

class Engine::Impl {
 public:
  Impl(Plan plan, EngineOptions options);
  ~Impl();

  void run_async();
  void sync();
  void add_observer(Observer* observer);
  void remove_observer(Observer* observer);
  const Plan& plan() const { return core_->plan; }

 private:
  enum class Outcome { kDone, kStalled };
  bool serial() const { return core_->options.mode == Mode::kSerial; }
  // Waits for the parallel run to finish, or until no task completed for stall_timeout.
  Outcome wait_for_run(milliseconds* quiet_for);
  void stop_and_join_all();
  void stop_after_stall();

  std::shared_ptr<EngineCore> core_;
  bool running_ = false;
  bool stalled_ = false;
  uint64_t progress_at_start_ = 0;
  Clock::time_point started_at_;
};

Engine::Impl::Impl(Plan plan, EngineOptions options)
    : core_(std::make_shared<EngineCore>(std::move(plan), options)) {
  if (serial()) return;
  const int num_executors = static_cast<int>(core_->plan.executors().size());
  for (ExecutorId e = 0; e < num_executors; ++e) {
    core_->executors.push_back(std::make_unique<ThreadExecutor>(core_.get(), e));
  }
  int started = 0;
  try {
    for (; started < num_executors; ++started) core_->executors[started]->start(core_);
  } catch (...) {
    for (int e = 0; e < started; ++e) core_->executors[e]->request_stop();
    for (int e = 0; e < started; ++e) core_->executors[e]->join();
    core_->executors.clear();
    throw;
  }
  std::string error;
  {
    MutexLock lock(&core_->mu);
    while (core_->threads_started < num_executors) core_->cv.wait();
    error = core_->startup_error;
  }
  if (!error.empty()) {
    stop_and_join_all();
    core_->executors.clear();
    throw Error(error);
  }
}

Engine::Impl::~Impl() {
  if (serial()) {
    if (!running_) return;
    run_serial(*core_);  // a run started and never synced still happens, as in kParallel
    if (core_->failure.failed()) {
      LOG(ERROR) << "Engine destroyed before sync(); its last run failed: "
                 << core_->failure.message();
    }
    return;
  }
  if (running_ && !stalled_) {
    milliseconds quiet_for{0};
    if (wait_for_run(&quiet_for) == Outcome::kStalled) {
      LOG(ERROR) << "Engine destroyed during a stalled run: " << core_->stall_report(quiet_for);
      stalled_ = true;
    } else if (core_->failure.failed()) {
      LOG(ERROR) << "Engine destroyed before sync(); its last run failed: "
                 << core_->failure.message();
    }
  }
  if (stalled_) {
    stop_after_stall();
  } else {
    stop_and_join_all();
  }
}

void Engine::Impl::stop_and_join_all() {
  for (auto& executor : core_->executors) executor->request_stop();
  for (auto& executor : core_->executors) executor->join();
}

void Engine::Impl::stop_after_stall() {
  core_->cancel();
  for (auto& executor : core_->executors) executor->request_stop();
  const size_t n = core_->executors.size();
  std::vector<bool> exited;
  {
    MutexLock lock(&core_->mu);
    const Clock::time_point deadline = Clock::now() + kAbandonGrace;
    while (static_cast<size_t>(
               std::count(core_->thread_exited.begin(), core_->thread_exited.end(), true)) < n) {
      const Clock::time_point now = Clock::now();
      if (now >= deadline) break;
      core_->cv.wait_for(deadline - now);
    }
    exited = core_->thread_exited;
  }
  for (size_t e = 0; e < n; ++e) {
    ThreadExecutor& executor = *core_->executors[e];
    if (!exited[e] && executor.abandon_if_busy()) {
      LOG(WARNING) << "abandoning executor thread " << core_->plan.executors()[e].name
                   << ": it is still inside a stalled task";
      executor.detach();
    } else {
      executor.join();
    }
  }
}

void Engine::Impl::run_async() {
  require(!stalled_,
          "Engine::run_async: an earlier run of this engine stalled and was abandoned; it cannot "
          "run again. Destroy it and build a new one.");
  require(!running_,
          "Engine::run_async: a run is already in progress; call sync() before starting another");
  core_->begin_run();
  running_ = true;
  if (serial()) return;
  progress_at_start_ = core_->progress();
  started_at_ = Clock::now();
  for (size_t e = 0; e < core_->executors.size(); ++e) {
    const std::vector<TaskId>& sources = core_->schedule.sources(static_cast<ExecutorId>(e));
    if (!sources.empty()) core_->executors[e]->push_all(sources);
  }
}

void Engine::Impl::sync() {
  if (!running_) return;
  if (serial()) {
    running_ = false;
    run_serial(*core_);
  } else {
    milliseconds quiet_for{0};
    const Outcome outcome = wait_for_run(&quiet_for);
    running_ = false;
    if (outcome == Outcome::kStalled) {
      stalled_ = true;
      std::string report = core_->stall_report(quiet_for);  // before cancelling: a snapshot
      core_->cancel();
      throw Error(report);
    }
  }
  if (core_->failure.failed()) throw Error(core_->failure.message());
}

Engine::Impl::Outcome Engine::Impl::wait_for_run(milliseconds* quiet_for) {
  const milliseconds timeout = core_->options.stall_timeout;
  const milliseconds slice = std::clamp(timeout / 10, milliseconds(1), milliseconds(1000));
  uint64_t last_progress = progress_at_start_;
  Clock::time_point last_change = started_at_;
  // A short run is often over within the executors' own idle spin: wait as they do, yielding,
  // before sleeping, so that its end costs no wake-up of this thread.
  const Clock::time_point spin_until = Clock::now() + core_->options.idle_spin;
  while (core_->executors_running.load(std::memory_order_acquire) > 0 && Clock::now() < spin_until)
    std::this_thread::yield();
  MutexLock lock(&core_->mu);
  while (!core_->run_done) {
    if (timeout.count() <= 0) {
      core_->cv.wait();
      continue;
    }
    core_->cv.wait_for(slice);
    if (core_->run_done) break;
    const uint64_t progress = core_->progress();
    const Clock::time_point now = Clock::now();
    if (progress != last_progress) {
      last_progress = progress;
      last_change = now;
    } else if (now - last_change >= timeout) {
      *quiet_for = std::chrono::duration_cast<milliseconds>(now - last_change);
      return Outcome::kStalled;
    }
  }
  return Outcome::kDone;
}

void Engine::Impl::add_observer(Observer* observer) {
  CHECK(observer != nullptr);
  require(!running_, "Engine::add_observer: not allowed during a run; call sync() first");
  auto& observers = core_->observers;
  if (std::find(observers.begin(), observers.end(), observer) == observers.end()) {
    observers.push_back(observer);
  }
  core_->prepare_device_timing();
  core_->has_observers = true;
}

void Engine::Impl::remove_observer(Observer* observer) {
  require(!running_, "Engine::remove_observer: not allowed during a run; call sync() first");
  auto& observers = core_->observers;
  observers.erase(std::remove(observers.begin(), observers.end(), observer), observers.end());
  core_->has_observers = !observers.empty();
}

Engine::Engine(Plan plan, EngineOptions options)
    : impl_(std::make_unique<Impl>(std::move(plan), options)) {}
Engine::~Engine() = default;
void Engine::run_async() { impl_->run_async(); }
void Engine::sync() { impl_->sync(); }
void Engine::add_observer(Observer* observer) { impl_->add_observer(observer); }
void Engine::remove_observer(Observer* observer) { impl_->remove_observer(observer); }
const Plan& Engine::plan() const { return impl_->plan(); }

}  // namespace purine::dispatch
