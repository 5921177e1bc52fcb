// Tracer: an Observer that records when each task ran on each executor and writes the record as
// Chrome-trace JSON (one "X" complete event per task run; pid = rank, tid = executor index; one
// thread_name metadata event per executor; args.location), which Perfetto (ui.perfetto.dev) and
// chrome://tracing open. One file per rank; merge_chrome_traces() joins them into one.
//
// A long run streams its trace: begin_file() starts the file, each flush_to_file() (e.g. after
// every run of the graph) appends the events recorded since and forgets them, so memory stays
// bounded by one flush interval; end_file() adds the executors' names and closes it.
//
// Records are keyed by executor index: a Tracer observes one engine at a time (several engines
// in turn are fine; engines running at the same time would mix their executors' records).
// Ownership: the Tracer copies the names it needs, so it may outlive the engines it observed.
// Register it with Engine::add_observer and keep it alive (or remove it) while the engine runs.
// Thread-safety: all methods may be called concurrently. Events go to a per-executor buffer
// guarded by its own mutex, which only that executor's thread takes during a run, so recording
// costs an uncontended lock, two clock reads and a push_back. Timestamps are steady_clock, so
// files written by ranks on the same machine line up when merged.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "dispatcher/observer.hpp"

namespace purine::dispatch {

class Tracer : public Observer {
 public:
  static constexpr int kMaxExecutors = 1024;

  Tracer();
  ~Tracer() override;
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  void on_task_start(const TaskEvent& event) override;
  void on_task_end(const TaskEvent& event) override;

  // Writes what was recorded so far (and keeps it). Throws purine::Error naming `path` if it
  // cannot be written.
  void write_chrome_trace(const std::string& path, int rank);

  // Streaming (see above). Each throws purine::Error naming the file when it cannot be written;
  // begin_file() while a file is open, or flush/end without one, is a programming error.
  void begin_file(const std::string& path, int rank);
  void flush_to_file();
  void end_file();
  bool file_open() const;
  // Concatenates the events of several trace files (as written by write_chrome_trace, usually one
  // per rank) into `output`. Throws purine::Error naming the file that cannot be read, is not a
  // trace, or cannot be written.
  static void merge_chrome_traces(std::vector<std::string> inputs, std::string output);

  // Completed task runs recorded so far, over all executors.
  size_t event_count() const;
  // Forgets all records (not the executor names).
  void clear();

 private:
  // The per-executor buffers and the open file, with their locks (tracer.cpp).
  class State;
  std::unique_ptr<State> state_;
};

}  // namespace purine::dispatch
