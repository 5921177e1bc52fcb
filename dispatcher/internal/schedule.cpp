#include "dispatcher/internal/schedule.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <functional>
#include <queue>
#include <sstream>

#include "base/error.hpp"

namespace purine::dispatch {
namespace {

void sort_unique(std::vector<TaskId>* ids) {
  std::sort(ids->begin(), ids->end());
  ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
}

// Kahn's algorithm with a min-heap, so the order depends only on the edges and the task ids.
// Returns fewer than n tasks when the graph has a cycle.
std::vector<TaskId> topological_order(const std::vector<std::vector<TaskId>>& successors) {
  const int n = static_cast<int>(successors.size());
  std::vector<int> in_degree(n, 0);
  for (const auto& next : successors) {
    for (TaskId t : next) ++in_degree[t];
  }
  std::priority_queue<TaskId, std::vector<TaskId>, std::greater<TaskId>> ready;
  for (TaskId t = 0; t < n; ++t) {
    if (in_degree[t] == 0) ready.push(t);
  }
  std::vector<TaskId> order;
  order.reserve(n);
  while (!ready.empty()) {
    const TaskId t = ready.top();
    ready.pop();
    order.push_back(t);
    for (TaskId next : successors[t]) {
      if (--in_degree[next] == 0) ready.push(next);
    }
  }
  return order;
}

// Called when Kahn's algorithm left tasks over: every leftover task has a leftover predecessor,
// so walking predecessors from any of them must come back to a task already seen.
[[noreturn]] void throw_cycle(const Plan& plan, const std::vector<std::vector<TaskId>>& successors,
                              const std::vector<TaskId>& order) {
  const int n = static_cast<int>(successors.size());
  std::vector<bool> left(n, true);
  for (TaskId t : order) left[t] = false;
  std::vector<TaskId> predecessor(n, -1);
  for (TaskId t = 0; t < n; ++t) {
    if (!left[t]) continue;
    for (TaskId next : successors[t]) {
      if (left[next] && predecessor[next] < 0) predecessor[next] = t;
    }
  }
  TaskId start = 0;
  while (!left[start]) ++start;
  std::vector<int> seen_at(n, -1);
  std::vector<TaskId> walk;
  TaskId t = start;
  while (seen_at[t] < 0) {
    CHECK_GE(predecessor[t], 0) << "leftover task without leftover predecessor";
    seen_at[t] = static_cast<int>(walk.size());
    walk.push_back(t);
    t = predecessor[t];
  }
  // walk[seen_at[t]..] is the cycle followed backwards (each entry depends on the next one).
  std::vector<TaskId> cycle(walk.begin() + seen_at[t], walk.end());
  std::reverse(cycle.begin(), cycle.end());
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
  std::ostringstream names;
  const size_t shown = std::min<size_t>(cycle.size(), 20);
  for (size_t i = 0; i < shown; ++i) names << plan.tasks()[cycle[i]].name << " -> ";
  if (shown < cycle.size()) names << "... (" << cycle.size() - shown << " more) -> ";
  names << plan.tasks()[cycle[0]].name;
  throw Error(str("the plan has a dependency cycle: ", names.str(), " (", n - order.size(), " of ",
                  n, " tasks can never start); remove one of these dependencies"));
}

}  // namespace

Schedule Schedule::build(const Plan& plan) {
  const int n = static_cast<int>(plan.tasks().size());
  std::vector<std::vector<TaskId>> successors = plan.successors();
  for (auto& next : successors) sort_unique(&next);

  Schedule s;
  s.order_ = topological_order(successors);
  if (static_cast<int>(s.order_.size()) != n) throw_cycle(plan, successors, s.order_);

  // Chain the users of each resource in topological order. The new edges follow that order, so
  // the graph stays acyclic and order_ stays a topological order of it.
  std::vector<int> position(n);
  for (int i = 0; i < n; ++i) position[s.order_[i]] = i;
  for (std::vector<TaskId> users : plan.resource_users()) {
    std::sort(users.begin(), users.end(),
              [&](TaskId a, TaskId b) { return position[a] < position[b]; });
    users.erase(std::unique(users.begin(), users.end()), users.end());
    for (size_t i = 1; i < users.size(); ++i) successors[users[i - 1]].push_back(users[i]);
  }

  const auto on_device = [&plan](TaskId t) {
    const ExecutorId e = plan.tasks()[t].executor;
    return e != kAnyExecutor && plan.executors()[e].kind == ExecutorKind::kDevice;
  };
  s.offsets_.assign(n + 1, 0);
  s.device_successors_end_.assign(n, 0);
  s.queue_waits_.assign(n, {});
  s.in_degree_.assign(n, 0);
  s.runs_first_.assign(n, 0);
  for (TaskId t = 0; t < n; ++t) s.runs_first_[t] = plan.tasks()[t].run_first;
  for (TaskId t = 0; t < n; ++t) {
    sort_unique(&successors[t]);
    const auto device_end =
        std::stable_partition(successors[t].begin(), successors[t].end(), on_device);
    s.offsets_[t + 1] = s.offsets_[t] + static_cast<int>(successors[t].size());
    s.device_successors_end_[t] =
        s.offsets_[t] + static_cast<int>(device_end - successors[t].begin());
    for (TaskId next : successors[t]) {
      ++s.in_degree_[next];
      if (on_device(t) && on_device(next) &&
          plan.tasks()[t].executor != plan.tasks()[next].executor)
        s.queue_waits_[next].push_back(t);
    }
  }
  s.successors_.reserve(s.offsets_[n] + 1);
  for (const auto& next : successors) {
    s.successors_.insert(s.successors_.end(), next.begin(), next.end());
  }
  s.successors_.push_back(-1);  // keeps &successors_[offsets_[n]] valid when there are no edges

  const int num_executors = static_cast<int>(plan.executors().size());
  s.sources_.assign(num_executors, {});
  s.tasks_per_executor_.assign(num_executors, 0);
  // Sources in reverse topological order: executors pop their queues from the back.
  std::vector<ExecutorId> cpu_threads;  // where floating sources start, in turn
  for (ExecutorId e = 0; e < num_executors; ++e)
    if (plan.executors()[e].kind == ExecutorKind::kCpuThread) cpu_threads.push_back(e);
  size_t next_floating_source = 0;
  for (auto it = s.order_.rbegin(); it != s.order_.rend(); ++it) {
    ExecutorId e = plan.tasks()[*it].executor;
    if (e == kAnyExecutor) {
      ++s.floating_tasks_;
      if (s.in_degree_[*it] > 0) continue;
      e = cpu_threads[next_floating_source++ % cpu_threads.size()];
    } else {
      ++s.tasks_per_executor_[e];
    }
    if (s.in_degree_[*it] == 0) s.sources_[e].push_back(*it);
  }
  return s;
}

}  // namespace purine::dispatch
