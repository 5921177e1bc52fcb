// DeviceGraphs: a Runnable's runs replayed as device graphs (RunOptions::device_graphs). The
// plan's device region (dispatcher/device_graph.hpp) is recorded once per memory layout of the
// rank's blobs, and each later run launches the recording with one call from a condensed plan's
// engine, which runs the rest of the plan as usual. A layout is the data pointers of every
// tensor of the rank: a recording keeps the addresses it was made with, and the swaps after each
// run (new and old weights, prefetched batches) alternate between two layouts, so a training run
// has two recordings. refusal() names what a recording could not replay faithfully; a recording
// that fails (a kernel that cannot be recorded) turns replay off for good, with a warning, and
// the runs go on as before.
//
// Running ahead (RunOptions::run_ahead): a replay's launch completes its run, so the host may
// start the next run, and launch the next replay behind this one on the queue, while the device
// still works on this one. The next run's host tasks (the data op, which writes the batch this
// replay's copy reads) start only once this replay has run (a polled gate task before them), and
// so does that run's sync() return: at most one replay is then in flight.
// What the host itself writes for a replay or reads from it between runs (the learning rate, the
// losses) must alternate between two blobs (swaps), as the trainer arranges
// (train/trainer.cpp); drain() waits for the replay in flight, as anything that reads the
// device's results must first. Off while an observer watches (it would see no device times).
//
// Not thread-safe: used by its Runnable's thread, between runs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dispatcher/device_graph.hpp"
#include "dispatcher/engine.hpp"
#include "purine/graph.hpp"

namespace purine {

class DeviceGraphs {
 public:
  // Why the ops of `graph` on `rank` cannot be replayed from a recording ("" when they can):
  // none is at a GPU location, they are at several GPUs, one communicates, or one draws random
  // numbers at each launch that a replay would repeat (dropout draws them anew at each replay).
  // With `compiled` false the graph has no memory yet (a simulation): the host ends of its GPU
  // copies count as page-locked, as compile() makes them where a GPU runtime is present.
  static std::string refusal(const Graph& graph, int rank, bool compiled = true);

  // `plan` is the Runnable's (copied); runs go eagerly until `eager_runs` have completed (they
  // make every lazy choice, such as cuDNN's algorithms and workspaces, before recording).
  DeviceGraphs(const Graph& graph, int rank, dispatch::Plan plan,
               dispatch::EngineOptions engine_options, int eager_runs, bool run_ahead = false);
  ~DeviceGraphs();  // drains

  // Starts this run as a replay and returns true, or returns false (an eager run now, or replay
  // turned off) having started nothing. Records the current layout first when it is new.
  bool start_run(int completed_runs);
  // Waits for the run start_run() started (Engine::sync); running ahead, then also for the replay
  // before it.
  void sync();
  // Whether replays run ahead: asked for, possible (else ahead_refusal() says why), and no
  // observer.
  bool running_ahead() const { return run_ahead_ && ahead_refusal_.empty() && observers_.empty(); }
  const std::string& ahead_refusal() const { return ahead_refusal_; }
  // Whether the last replay may still be running on the device (running ahead).
  bool in_flight() const { return in_flight_ != nullptr; }
  // Waits until the last replay has run on the device. Throws purine::Error if the device failed.
  void drain();
  // Replays launched while the one before them was still running on the device.
  int64_t launched_ahead() const { return launched_ahead_; }
  bool on() const { return off_reason_.empty(); }
  const std::string& off_reason() const { return off_reason_; }
  int recordings() const { return static_cast<int>(recordings_.size()); }
  // The device operations one replay runs (RecordedRegion::operations() of the recording made
  // last; every layout records the same work), or -1 before any or where unknown.
  int operations_per_replay() const { return current_ ? current_->operations() : -1; }
  int64_t replays() const { return replays_; }
  void add_observer(dispatch::Observer* observer);

 private:
  // A hash of the data pointers of the rank's tensors.
  uint64_t layout() const;
  void turn_off(const std::string& reason);
  // The engine of the condensed plan, with the gate when running ahead.
  std::unique_ptr<dispatch::Engine> make_engine();
  // The condensed plan's launching task: on the origin's executor thread.
  void launch();

  const Graph& graph_;
  const int rank_;
  const dispatch::Plan plan_;
  const dispatch::DeviceRegion region_;
  const int eager_runs_;
  const dispatch::EngineOptions engine_options_;
  const bool run_ahead_;
  std::vector<dispatch::Observer*> observers_;
  std::string ahead_refusal_;
  dispatch::ExecutorId gate_executor_ = -1;  // a kCpuThread executor
  // Running ahead: the replays' end events, recorded on the origin after each launch, in turn;
  // the one of the replay in flight, of the one before the run being started (for the gate),
  // and of the replay being launched.
  std::unique_ptr<QueueEvent> ends_[2];
  QueueEvent* in_flight_ = nullptr;
  QueueEvent* previous_end_ = nullptr;
  QueueEvent* launch_end_ = nullptr;
  int64_t launched_ahead_ = 0;
  std::map<uint64_t, std::unique_ptr<dispatch::RecordedRegion>> recordings_;
  dispatch::RecordedRegion* current_ = nullptr;
  std::unique_ptr<dispatch::Engine> engine_;
  std::string off_reason_;
  int64_t replays_ = 0;
};

}  // namespace purine
