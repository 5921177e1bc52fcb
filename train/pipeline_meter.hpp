// The bubble of a pipeline as it trains: an observer of the dispatcher's tasks that measures,
// per iteration, how long each stage's main thread worked (its passes, and its copies and
// updates) and how long the iteration took, so that the idle share of the busiest stage (the
// bubble) can be set next to the theory (bubble_theory() in graphs/pipeline.hpp). Over ranks, each
// process sees its own stages; merge() puts their totals together.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/location.hpp"
#include "dispatcher/observer.hpp"
#include "purine/graph.hpp"

namespace purine {

// What the stages did in one iteration, or summed over several.
struct PipelineTimes {
  std::vector<double> busy;  // seconds of work on each stage's main thread
  // Seconds from the first stage task's start to the last one's end: the iteration's span
  // (over ranks, that of stage 0, which starts first and finishes last, is the longest).
  double span = 0;
  int in_flight = 0;  // the most micro-batches begun and not finished at one stage

  // 1 - the busiest stage's work / the span.
  double bubble() const;
  // The least busy stage's work / the busiest's.
  double balance() const;
  // Adds `other`'s work and span (an iteration more of this process).
  void add(const PipelineTimes& other);
  // Merges another process's totals of the same iterations: its stages' work, the longer span.
  void merge(const PipelineTimes& other);
  // A text form to send between ranks, and back.
  std::string serialize() const;
  static PipelineTimes parse(const std::string& text);
};

class PipelineMeter : public dispatch::Observer {
 public:
  // `stages`: every stage's location, in order (those of other ranks too).
  PipelineMeter(const Graph& graph, std::vector<Location> stages, int micro_batches);

  void on_task_start(const dispatch::TaskEvent& e) override;
  void on_task_end(const dispatch::TaskEvent& e) override;

  // The tasks seen since the last call, measured; then forgets them.
  PipelineTimes finish_iteration();

 private:
  using Clock = std::chrono::steady_clock;
  struct Task {
    int stage = -1;  // -1: not on a stage's main thread
    int micro = -1;  // -1: no micro-batch's forward or backward pass
    bool forward = true;
  };
  struct Record {
    Task task;
    Clock::time_point start, end;
  };
  const Task& task_of(const std::string* name);

  const Graph& graph_;
  std::vector<Location> stages_;
  int micro_batches_;
  std::mutex mutex_;
  std::map<const std::string*, Task> tasks_;
  std::map<const std::string*, Clock::time_point> started_;
  std::vector<Record> records_;
};

}  // namespace purine
