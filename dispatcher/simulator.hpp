// simulate(): replays a Plan by discrete-event simulation instead of running it, under the
// dispatcher's own rules, with a duration per task given by the caller (the dispatcher never
// learns what a task does; purine/ and train/ turn ops, shapes and a cluster into durations).
//
//   Plan plan = ...;                       // as for an Engine; the tasks' run() is never called
//   SimulationSetup setup;
//   setup.costs.assign(plan.tasks().size(), {});
//   setup.costs[t].busy = 2e-3;            // seconds each
//   Simulation sim = simulate(plan, setup);  // sim.at(t).start, sim.at(t).end, sim.makespan
//
// The rules replayed: a task becomes ready when all its predecessors have completed (the edges
// of the plan and the resource chains, exactly as Schedule builds them for an Engine); every
// executor runs one task at a time; among its ready tasks it runs the first in the plan's
// deterministic topological order (the serial engine's order: on one executor with every cost
// equal the simulated order is the serial engine's), Task::run_first ones before the others. A task
// holds its executor for `busy`, then optionally transfers over a route of channels (links: each
// carries one transfer at a time for its transfer seconds, first come first served; a transfer
// reaches the next channel of its route when it starts on one, and completes latency after its
// last), with its executor free (an MPI send polled in the background) or held (a copy on an
// in-order device queue). Tasks sharing a collective id complete together once the
// last of them has finished its busy part, plus latency + transfer (MPI_Allreduce). Executors may
// share a pool of cores (threads of one CPU): a task's busy part then also needs a free core; the
// executors waiting for one are served by the ready time of their next task, then by executor id.
// With time slicing, a pool's polled transfers take shares of its cores from its busy tasks.
// A pool's executors may sleep when idle, and waking one costs time (pool_wake_cost, _latency).
//
// Iterations: executor_group says which process (rank) each executor belongs to. Iteration k+1
// of a group starts (its tasks may become ready) once every task of that group has completed
// iteration k, plus iteration_gap: each rank drives its own Engine, one run after another, and
// the ranks meet only through the tasks that join them. Floating tasks (kAnyExecutor) are not
// simulated: give every task an executor.
//
// Deterministic: equal inputs give equal timelines. A function without state; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "dispatcher/plan.hpp"

namespace purine::dispatch {

struct SimulatedCost {
  double busy = 0;  // seconds on its executor (and a core of its pool)
  // After busy: a transfer through `channels` in order (its route, each channel at most once),
  // taking each for `transfer` seconds in turn with the transfers queued there, cut-through
  // (it joins the next channel's queue as it starts on one); it completes `latency` after its
  // last channel is done, the route's delay, which takes no channel. Without channels: latency +
  // transfer after busy, nothing shared.
  double latency = 0;
  double transfer = 0;
  std::vector<int> channels;
  bool hold_executor = false;  // the executor stays busy until the transfer ends
  int collective = -1;         // >= 0: completes with every other task of this id
  // > 0: the transfer (without channels) advances only when polled, as a non-blocking MPI
  // collective does: in this many equal rounds, each started, and the task completed, only when
  // its executor is between tasks (at once when it is idle; else when its current task ends).
  int poll_rounds = 0;
};

struct SimulationSetup {
  std::vector<SimulatedCost> costs;  // one per task of the plan
  std::vector<int> executor_group;   // per executor; empty: one group
  std::vector<int> executor_pool;    // per executor, -1: no pool; empty: none
  std::vector<int> pool_cores;       // per pool, at least 1
  // Per pool (empty: none): while all its cores are busy, an executor of the pool gets to poll
  // (a polled transfer's next round or completion) only this long after it wanted to: the time
  // slice an OS gives a yielding thread among busy ones.
  std::vector<double> pool_poll_delay;
  // Per pool (empty: none): time slicing. A polled transfer (poll_rounds > 0) of an executor of
  // the pool is work of its polling thread (MPI_Test copying and summing in that thread), which
  // shares the cores with the busy tasks: while more of them run than the pool has cores, each
  // advances at cores / running (processor sharing; busy tasks still wait for a free core).
  std::vector<bool> pool_time_slicing;
  // Per pool (empty: none): sleeping threads. An executor of the pool idle for longer than
  // idle_spin (nothing ready, nothing in flight) sleeps, as the dispatcher's threads do
  // (EngineOptions::idle_spin); a task made ready for it then starts wake_latency later, and the
  // executor whose task completion made it ready, if it is between tasks, loses wake_cost (the
  // futex wake; on a virtual machine an interrupt to a halted virtual CPU). A group's executors
  // count as awake when its iteration starts: the gap between runs includes that wake-up.
  std::vector<double> pool_wake_cost, pool_wake_latency;
  double idle_spin = 0;
  int channels = 0;  // channel ids in costs are below this
  int iterations = 1;
  double iteration_gap = 0;  // seconds between a group's iterations
};

struct TaskInterval {
  double start = 0;           // its executor took it
  double busy_end = 0;        // its busy part ended
  double transfer_start = 0;  // it took its first channel (== busy_end without a wait)
  double end = 0;             // completed: its successors may start
};

struct Simulation {
  int num_tasks = 0;
  std::vector<TaskInterval> intervals;  // [iteration * num_tasks + task]
  // Per group and iteration: when its first task started and its last one completed.
  std::vector<std::vector<double>> iteration_start, iteration_end;
  double makespan = 0;
  // Per executor and channel: seconds busy over all iterations.
  std::vector<double> executor_busy, channel_busy;
  // When each transfer took each channel of its route: task t's hops of iteration k are
  // hop_start[k * hop_base.back() + hop_base[t] + hop].
  std::vector<int> hop_base;
  std::vector<double> hop_start;

  const TaskInterval& at(TaskId task, int iteration = 0) const {
    return intervals[static_cast<size_t>(iteration) * num_tasks + task];
  }
  double channel_start(TaskId task, int iteration, int hop) const {
    return hop_start[static_cast<size_t>(iteration) * hop_base.back() + hop_base[task] + hop];
  }
};

// Throws purine::Error on a cycle (naming it, as an Engine does), a floating task, costs of the
// wrong count, a negative or non-finite duration, or a channel, pool or group out of range.
Simulation simulate(const Plan& plan, const SimulationSetup& setup);

// Writes the simulated timeline as Chrome-trace JSON in the Tracer's format (dispatcher/
// tracer.hpp: pid `rank`, tid = executor index, one thread name per executor), so that a real
// run's trace and a simulated one open side by side in Perfetto. Channels appear as threads
// after the executors, named `channel_names` (transfers as their tasks' names). Throws
// purine::Error naming the file when it cannot be written.
void write_simulation_trace(const Plan& plan, const SimulationSetup& setup, const Simulation& sim,
                            const std::vector<std::string>& channel_names, const std::string& path,
                            int rank = 0);

}  // namespace purine::dispatch
