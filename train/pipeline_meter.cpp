#include "train/pipeline_meter.hpp"

#include <algorithm>
#include <sstream>

#include "base/error.hpp"
#include "graphs/pipeline.hpp"

namespace purine {

double PipelineTimes::bubble() const {
  if (busy.empty() || span <= 0) return 0;
  return 1.0 - *std::max_element(busy.begin(), busy.end()) / span;
}

double PipelineTimes::balance() const {
  if (busy.empty()) return 0;
  const double most = *std::max_element(busy.begin(), busy.end());
  return most > 0 ? *std::min_element(busy.begin(), busy.end()) / most : 0;
}

void PipelineTimes::add(const PipelineTimes& other) {
  busy.resize(std::max(busy.size(), other.busy.size()), 0);
  for (size_t s = 0; s < other.busy.size(); ++s) busy[s] += other.busy[s];
  span += other.span;
  in_flight = std::max(in_flight, other.in_flight);
}

void PipelineTimes::merge(const PipelineTimes& other) {
  const double longer = std::max(span, other.span);
  add(other);
  span = longer;
}

std::string PipelineTimes::serialize() const {
  std::ostringstream out;
  out.precision(17);
  out << span << ' ' << in_flight << ' ' << busy.size();
  for (double b : busy) out << ' ' << b;
  return out.str();
}

PipelineTimes PipelineTimes::parse(const std::string& text) {
  std::istringstream in(text);
  PipelineTimes times;
  size_t stages = 0;
  in >> times.span >> times.in_flight >> stages;
  times.busy.resize(stages);
  for (double& b : times.busy) in >> b;
  require(!in.fail(), "pipeline times: cannot parse '", text, "'");
  return times;
}

PipelineMeter::PipelineMeter(const Graph& graph, std::vector<Location> stages, int micro_batches)
    : graph_(graph), stages_(std::move(stages)), micro_batches_(micro_batches) {}

void PipelineMeter::on_task_start(const dispatch::TaskEvent& e) {
  std::lock_guard<std::mutex> lock(mutex_);
  started_[e.task_name] = e.time;
}

void PipelineMeter::on_task_end(const dispatch::TaskEvent& e) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Task& task = task_of(e.task_name);
  if (task.stage >= 0) records_.push_back({task, started_[e.task_name], e.time});
}

PipelineTimes PipelineMeter::finish_iteration() {
  std::lock_guard<std::mutex> lock(mutex_);
  PipelineTimes times;
  times.busy.assign(stages_.size(), 0);
  if (records_.empty()) return times;
  Clock::time_point first = records_[0].start, last = records_[0].end;
  // Per stage and micro-batch: the first forward's start and the last backward's end.
  std::map<std::pair<int, int>, std::pair<Clock::time_point, Clock::time_point>> life;
  for (const Record& r : records_) {
    first = std::min(first, r.start);
    last = std::max(last, r.end);
    times.busy[r.task.stage] += std::chrono::duration<double>(r.end - r.start).count();
    if (r.task.micro < 0) continue;
    auto [entry, fresh] = life.try_emplace({r.task.stage, r.task.micro}, r.start, r.end);
    if (r.task.forward) entry->second.first = std::min(entry->second.first, r.start);
    if (!r.task.forward) entry->second.second = std::max(entry->second.second, r.end);
    if (fresh && !r.task.forward) entry->second.first = r.start;
  }
  times.span = std::chrono::duration<double>(last - first).count();
  for (int s = 0; s < static_cast<int>(stages_.size()); ++s) {
    std::vector<std::pair<Clock::time_point, int>> edges;
    for (const auto& [key, span] : life)
      if (key.first == s) {
        edges.emplace_back(span.first, +1);
        edges.emplace_back(span.second, -1);
      }
    std::sort(edges.begin(), edges.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second < b.second;  // leave first
    });
    int now = 0;
    for (const auto& edge : edges) times.in_flight = std::max(times.in_flight, now += edge.second);
  }
  records_.clear();
  started_.clear();
  return times;
}

const PipelineMeter::Task& PipelineMeter::task_of(const std::string* name) {
  auto it = tasks_.find(name);
  if (it != tasks_.end()) return it->second;
  Task task;
  if (const Op* op = graph_.find_op(*name); op && op->thread() == Graph::kMainThread) {
    auto at = std::find(stages_.begin(), stages_.end(), op->location());
    if (at != stages_.end()) {
      task.stage = static_cast<int>(at - stages_.begin());
      // The passes of micro-batches (one micro-batch has no "micro<m>" scope: the whole batch is
      // micro-batch 0); the stage's other work (its copies, its updates) is busy time too.
      if (op->role() == OpRole::kForward || op->role() == OpRole::kBackward)
        task.micro = micro_batches_ == 1 ? 0 : micro_batch_of(*op);
      task.forward = op->role() == OpRole::kForward;
    }
  }
  return tasks_[name] = task;
}

}  // namespace purine
