#include "dispatcher/internal/thread_executor.hpp"

#include <glog/logging.h>
#include <pthread.h>

#include <chrono>
#include <exception>
#include <utility>

#include "base/error.hpp"
#include "dispatcher/internal/engine_core.hpp"

namespace purine::dispatch {

ThreadExecutor::ThreadExecutor(EngineCore* core, ExecutorId id)
    : core_(core),
      id_(id),
      tasks_per_run_(core->schedule.tasks_on(id)),
      cpu_thread_(core->plan.executors()[id].kind == ExecutorKind::kCpuThread),
      queue_(core->plan.executors()[id].queue.get()) {
  local_.reserve(64);
  first_.reserve(16);
}

ThreadExecutor::~ThreadExecutor() {
  CHECK(!thread_.joinable()) << "executor thread " << id_ << " was neither joined nor detached";
}

void ThreadExecutor::start(std::shared_ptr<EngineCore> core) {
  CHECK(!thread_.joinable());
  thread_ = std::thread([this, core = std::move(core)]() mutable { thread_main(std::move(core)); });
}

namespace {

// Names the OS thread after its executor, so that top -H, perf and gdb tell them apart. Linux
// allows 15 characters: the rank prefix ("rank0:") goes, every process knows its own rank.
void name_this_thread(const std::string& executor) {
  std::string name = executor;
  const size_t colon = name.find(':');
  if (name.rfind("rank", 0) == 0 && colon != std::string::npos) name.erase(0, colon + 1);
  if (name.size() > 15) name.erase(0, name.size() - 15);
  pthread_setname_np(pthread_self(), name.c_str());
}

}  // namespace

void ThreadExecutor::join() { thread_.join(); }
void ThreadExecutor::detach() { thread_.detach(); }

void ThreadExecutor::push(TaskId task) {
  bool wake;
  {
    MutexLock lock(&mu_);
    inbox_.push_back(task);
    has_inbox_.store(true, std::memory_order_release);
    wake = sleeping_;
  }
  if (wake) cv_.signal();
}

void ThreadExecutor::push_all(const std::vector<TaskId>& tasks) {
  bool wake;
  {
    MutexLock lock(&mu_);
    inbox_.insert(inbox_.end(), tasks.begin(), tasks.end());
    has_inbox_.store(true, std::memory_order_release);
    wake = sleeping_;
  }
  if (wake) cv_.signal();
}

void ThreadExecutor::request_stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    stopping_.store(true, std::memory_order_relaxed);
  }
  cv_.signal_all();
}

bool ThreadExecutor::abandon_if_busy() {
  TaskId task = current_.load(std::memory_order_acquire);
  while (task >= 0) {
    if (current_.compare_exchange_weak(task, kAbandoned, std::memory_order_acq_rel)) return true;
  }
  return false;
}

void ThreadExecutor::thread_main(std::shared_ptr<EngineCore> keep_alive) {
  const ExecutorSpec& spec = core_->plan.executors()[id_];
  name_this_thread(spec.name);
  std::string error;
  if (spec.on_thread_start) {
    try {
      spec.on_thread_start();
    } catch (...) {
      error = str("executor ", spec.name,
                  ": on_thread_start failed: ", describe(std::current_exception()));
    }
  }
  {
    MutexLock lock(&core_->mu);
    ++core_->threads_started;
    if (!error.empty() && core_->startup_error.empty()) core_->startup_error = error;
    core_->cv.signal_all();
  }
  if (!loop()) return;  // abandoned inside a stuck task: touch nothing more
  MutexLock lock(&core_->mu);
  core_->thread_exited[id_] = true;
  core_->cv.signal_all();
  // keep_alive goes last, after the lock is released.
}

bool ThreadExecutor::loop() {
  // Since when only polled tasks have been left and none has finished (while polls_idle).
  bool polls_idle = false;
  std::chrono::steady_clock::time_point idle_since;
  for (;;) {
    while (has_ready()) {
      if (!execute(take_ready())) return false;
      // Not while sends wait to start: a poll may move a whole message (Open MPI copies a large
      // one inside MPI_Test) while the peer waits for them.
      if (first_.empty() && !in_flight_.empty() && !poll_in_flight()) return false;
    }
    if (in_flight_.empty()) {
      if (!fetch(/*block=*/true)) return true;
      continue;
    }
    // Only polled tasks are left: poll them, look at the inbox, let other threads run.
    const size_t before = in_flight_.size();
    if (!poll_in_flight()) return false;
    if (has_ready()) continue;
    if (!fetch(/*block=*/false)) return true;
    if (has_ready() || in_flight_.size() < before) {
      polls_idle = false;
    } else if (!in_flight_.empty()) {
      // Yield between rounds: on a busy core that hands it over at once. Receives posted at the
      // start of a training step wait for most of it, and sleeping there was measured to cost
      // more (late completions, timer wake-ups) than yielding; only a wait far longer than a
      // step (a slow or dead peer) backs off to pauses between rounds.
      const auto now = std::chrono::steady_clock::now();
      if (!polls_idle) {
        polls_idle = true;
        idle_since = now;
      }
      if (now - idle_since < kPollSpin) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(kPollPause);
      }
    }
  }
}

bool ThreadExecutor::execute(TaskId task) {
  EngineCore& core = *core_;
  if (!core.cancelled()) {
    const Task& spec = core.tasks.task(task);
    const bool observed = core.has_observers;
    current_.store(task, std::memory_order_relaxed);
    // A device task (a floating task may run on a device executor's thread too, as a host task).
    QueueEvent* const event = core.events[task].get();
    bool issued = false;
    try {
      if (observed && !event) core.notify_start(task, id_);
      if (event) {
        for (const TaskId before : core.schedule.queue_waits(task))
          queue_->wait(*core.events[before]);
        if (observed) {
          anchor_run();
          queue_->record(*core.timings[task].start);
        }
      }
      if (spec.run) spec.run();
      if (event) {
        if (observed) queue_->record(*core.timings[task].end);
        queue_->record(*event);
        issued = true;
      }
    } catch (...) {
      core.fail(task, std::current_exception());
    }
    if (current_.exchange(kIdle, std::memory_order_acq_rel) == kAbandoned) return false;
    if (observed && !event) {
      try {
        core.notify_end(task, id_);
      } catch (...) {
        core.fail(task, std::current_exception());
      }
    }
    if (issued && spec.complete_at_launch) {
      complete(task);  // every successor and the run's end wait for the launch alone
      return true;
    }
    if (issued && !core.cancelled()) {
      // Successors on device queues may launch now; the host ones wait for the event.
      release(core.tasks.successors_begin(task), core.schedule.device_successors_end(task));
      core.tasks.set_state(task, core.run_index, TaskTable::kPolling);
      in_flight_.push_back(task);
      return true;
    }
    if (spec.poll && !core.cancelled()) {
      core.tasks.set_state(task, core.run_index, TaskTable::kPolling);
      in_flight_.push_back(task);
      return true;
    }
  }
  complete(task);
  return true;
}

bool ThreadExecutor::poll_in_flight() {
  EngineCore& core = *core_;
  size_t kept = 0;
  // This executor's device tasks sit here in the order they were put on its one queue, which
  // runs them in that order: once one is not done, none after it is, and asking costs a call
  // into the driver per task (quadratic in a run's launches if every one asked every time).
  bool queue_behind = false;
  for (size_t i = 0; i < in_flight_.size(); ++i) {
    const TaskId task = in_flight_[i];
    bool done = true;
    QueueEvent* const event = core.events[task].get();
    if (event && queue_behind) {
      in_flight_[kept++] = task;
      continue;
    }
    if (!core.cancelled()) {
      current_.store(task, std::memory_order_relaxed);
      try {
        done = event ? event->done() : core.tasks.task(task).poll();
      } catch (...) {
        core.fail(task, std::current_exception());
      }
      if (current_.exchange(kIdle, std::memory_order_acq_rel) == kAbandoned) return false;
      if (event && !done) queue_behind = true;
    }
    if (done) {
      if (event && core.has_observers && !core.cancelled()) {
        try {
          report_device_times(task);
        } catch (...) {
          core.fail(task, std::current_exception());
        }
      }
      complete(task, /*issued_on_queue=*/event != nullptr);
    } else {
      in_flight_[kept++] = task;
    }
  }
  in_flight_.resize(kept);
  return true;
}

void ThreadExecutor::anchor_run() {
  if (anchored_run_ == core_->run_index) return;
  if (!anchor_) anchor_ = queue_->create_event(/*timed=*/true);
  queue_->record(*anchor_);
  anchor_time_ = std::chrono::steady_clock::now();
  anchored_run_ = core_->run_index;
}

void ThreadExecutor::report_device_times(TaskId task) {
  const EngineCore::DeviceTiming& t = core_->timings[task];
  const auto host_time = [this](QueueEvent& e) {
    return anchor_time_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(e.seconds_since(*anchor_)));
  };
  core_->notify_device(task, id_, host_time(*t.start), host_time(*t.end));
}

bool ThreadExecutor::fetch(bool block) {
  if (block) {
    idle_.store(true, std::memory_order_relaxed);
    // Spin before sleeping, yielding the CPU on every turn: on an idle machine sched_yield
    // returns at once and a hand-over costs a cache miss; on an oversubscribed one the thread
    // that would hand us work gets the CPU instead of waiting behind a spinner. No PAUSE loop:
    // under KVM, pause-loop exiting deschedules such a spinner.
    const auto budget = core_->options.idle_spin;
    if (budget.count() > 0) {
      const auto deadline = std::chrono::steady_clock::now() + budget;
      while (!has_inbox_.load(std::memory_order_acquire) &&
             !stopping_.load(std::memory_order_relaxed) &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
    }
  } else if (!has_inbox_.load(std::memory_order_acquire)) {
    return !stopping_.load(std::memory_order_relaxed);
  }
  MutexLock lock(&mu_);
  if (block) {
    while (inbox_.empty() && !stop_) {
      sleeping_ = true;
      cv_.wait();
      sleeping_ = false;
    }
    idle_.store(false, std::memory_order_relaxed);
  }
  if (inbox_.empty()) return !stop_;
  DCHECK(!has_ready());
  for (const TaskId task : inbox_) keep(task);
  inbox_.clear();
  has_inbox_.store(false, std::memory_order_relaxed);
  return true;
}

void ThreadExecutor::keep(TaskId task) {
  (core_->schedule.runs_first(task) ? first_ : local_).push_back(task);
}

TaskId ThreadExecutor::take_ready() {
  std::vector<TaskId>& from = first_.empty() ? local_ : first_;
  const TaskId task = from.back();
  from.pop_back();
  return task;
}

void ThreadExecutor::complete(TaskId task, bool issued_on_queue) {
  EngineCore& core = *core_;
  TaskTable& tasks = core.tasks;
  tasks.set_state(task, core.run_index, TaskTable::kDone);
  release(
      issued_on_queue ? core.schedule.device_successors_end(task) : tasks.successors_begin(task),
      tasks.successors_end(task));
  const bool floating = tasks.owner(task) == kAnyExecutor;
  completed_.store(completed_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  // Either may let the Engine start the next run.
  if (floating) {
    if (core.floating_left.fetch_sub(1, std::memory_order_acq_rel) == 1)
      core.executor_finished_run();
  } else if (++completed_this_run_ == tasks_per_run_) {
    completed_this_run_ = 0;
    core.executor_finished_run();
  }
}

void ThreadExecutor::release(const TaskId* const begin, const TaskId* const end) {
  EngineCore& core = *core_;
  TaskTable& tasks = core.tasks;
  // Start all the cache misses at once rather than one after the other.
  for (const TaskId* next = begin; next != end; ++next) tasks.prefetch_record(*next);
  for (const TaskId* next = begin; next != end; ++next) {
    if (!tasks.satisfy(*next)) continue;
    ExecutorId owner = tasks.owner(*next);
    if (owner == kAnyExecutor) {
      // Run it here next, unless there is other work here (or this is no compute thread) and
      // another executor is idle.
      ThreadExecutor* idle = !has_ready() && cpu_thread_ ? nullptr : core.idle_executor(id_);
      owner = idle ? idle->id_ : id_;
    }
    if (owner == id_) {
      tasks.prefetch_task(*next);
      keep(*next);
    } else {
      core.executors[owner]->push(*next);
    }
  }
}

}  // namespace purine::dispatch
