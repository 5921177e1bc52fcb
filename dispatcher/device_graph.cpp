#include "dispatcher/device_graph.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "base/error.hpp"
#include "dispatcher/internal/first_failure.hpp"
#include "dispatcher/internal/schedule.hpp"

namespace purine::dispatch {

DeviceRegion find_device_region(const Plan& plan) {
  return find_device_region(
      plan, [&plan](ExecutorId e) { return plan.executors()[e].kind == ExecutorKind::kDevice; });
}

DeviceRegion find_device_region(const Plan& plan,
                                const std::function<bool(ExecutorId)>& on_device) {
  const Schedule schedule = Schedule::build(plan);
  const int n = schedule.num_tasks();
  // after_host[t]: a host task comes before t, or t is one.
  std::vector<bool> after_host(n, false);
  DeviceRegion region;
  for (const TaskId t : schedule.order()) {
    const ExecutorId e = plan.tasks()[t].executor;
    if (e == kAnyExecutor || !on_device(e)) after_host[t] = true;
    if (!after_host[t]) region.tasks.push_back(t);
    for (const TaskId* next = schedule.successors_begin(t); next != schedule.successors_end(t);
         ++next)
      if (after_host[t]) after_host[*next] = true;
  }
  if (!region.empty()) region.origin = plan.tasks()[region.tasks.front()].executor;
  return region;
}

Plan condense(const Plan& plan, const DeviceRegion& region, std::string name,
              std::function<void()> launch, bool complete_at_launch) {
  const int n = static_cast<int>(plan.tasks().size());
  std::vector<bool> in_region(n, false);
  for (const TaskId t : region.tasks) in_region[t] = true;
  Plan out;
  for (const ExecutorSpec& spec : plan.executors()) out.add_executor(spec);
  std::vector<TaskId> id(n, -1);
  for (TaskId t = 0; t < n; ++t)
    if (!in_region[t]) id[t] = out.add_task(plan.tasks()[t]);
  Task launcher;
  launcher.name = std::move(name);
  launcher.location = plan.tasks()[region.tasks.front()].location;
  launcher.executor = region.origin;
  launcher.run = std::move(launch);
  launcher.complete_at_launch = complete_at_launch;
  const TaskId graph_task = out.add_task(std::move(launcher));
  for (TaskId t = 0; t < n; ++t) id[t] = in_region[t] ? graph_task : id[t];
  for (TaskId t = 0; t < n; ++t)
    for (const TaskId next : plan.successors()[t])
      if (!in_region[next] && id[t] != id[next]) out.add_dependency(id[t], id[next]);
  for (size_t r = 0; r < plan.resources().size(); ++r) {
    const ResourceId resource = out.add_resource(plan.resources()[r]);
    std::set<TaskId> users;
    for (const TaskId t : plan.resource_users()[r])
      if (users.insert(id[t]).second) out.use_resource(id[t], resource);
  }
  return out;
}

std::unique_ptr<RecordedRegion> record(const Plan& plan, const DeviceRegion& region) {
  require(!region.empty(), "nothing to record: the plan has no device task before its host tasks");
  const Schedule schedule = Schedule::build(plan);
  const ExecutorSpec& origin_spec = plan.executors()[region.origin];
  DeviceQueue& origin = *origin_spec.queue;
  const auto queue_of = [&plan](TaskId t) -> DeviceQueue& {
    return *plan.executors()[plan.tasks()[t].executor].queue;
  };
  // Every event before the recording starts (creating one is not a queue's work): the fork the
  // other queues join by, one per task, and one per other queue to rejoin the origin by.
  std::vector<std::unique_ptr<QueueEvent>> events;
  events.push_back(origin.create_event());
  QueueEvent& fork = *events.back();
  std::map<TaskId, QueueEvent*> done;
  std::map<DeviceQueue*, QueueEvent*> rejoin;
  for (const TaskId t : region.tasks) {
    DeviceQueue& queue = queue_of(t);
    events.push_back(queue.create_event());
    done[t] = events.back().get();
    if (&queue != &origin && !rejoin.count(&queue)) {
      events.push_back(queue.create_event());
      rejoin[&queue] = events.back().get();
    }
  }
  // The recording thread launches as the origin's executor thread does (its device current).
  if (origin_spec.on_thread_start) origin_spec.on_thread_start();
  std::set<DeviceQueue*> joined;
  LaunchWords words;
  origin.begin_capture();
  try {
    origin.record(fork);
    for (const TaskId t : region.tasks) {
      const Task& task = plan.tasks()[t];
      DeviceQueue& queue = queue_of(t);
      if (&queue != &origin && joined.insert(&queue).second) queue.wait(fork);
      for (const TaskId before : schedule.queue_waits(t)) queue.wait(*done.at(before));
      try {
        if (task.run) task.run();
      } catch (...) {
        throw Error(str("recording task ", task.name,
                        " for a device graph: ", describe(std::current_exception())));
      }
      queue.record(*done.at(t));
    }
    for (const auto& [queue, end] : rejoin) {
      queue->record(*end);
      origin.wait(*end);
    }
  } catch (...) {
    try {
      origin.end_capture();
    } catch (const Error&) {  // the first failure is the one to report
    }
    throw;
  }
  std::unique_ptr<QueueGraph> graph = origin.end_capture();
  return std::make_unique<RecordedRegion>(origin, std::move(graph), std::move(events),
                                          words.take());
}

}  // namespace purine::dispatch
