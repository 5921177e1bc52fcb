#include "dispatcher/simulator.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <map>
#include <queue>
#include <set>
#include <tuple>

#include "base/error.hpp"
#include "dispatcher/internal/schedule.hpp"
#include "dispatcher/tracer.hpp"

namespace purine::dispatch {
namespace {

enum class EventKind {
  kBusyEnd,
  kTransferEnd,
  kGateOpen,
  kRoundEnd,
  kPollDue,
  kChannelFree,
  kAvailable,  // an executor back from waking up, or from waking another (payload: executor)
};

struct Event {
  double time;
  long seq;  // ties: in the order they were made
  EventKind kind;
  long payload;  // an instance (iteration * n + task), or group * iterations + iteration
  long stamp;    // >= 0: the instance's time-sliced end, stale once the instance's stamp moved
  int channel;   // kChannelFree: the channel
  bool operator>(const Event& other) const {
    return std::tie(time, seq) > std::tie(other.time, other.seq);
  }
};

void check_duration(double seconds, const std::string& what, const std::string& task) {
  require(std::isfinite(seconds) && seconds >= 0, "simulate: task ", task, ": its ", what,
          " must be a finite number of seconds >= 0, got ", seconds);
}

class Replay {
 public:
  Replay(const Plan& plan, const SimulationSetup& setup)
      : plan_(plan),
        setup_(setup),
        schedule_(Schedule::build(plan)),
        n_(static_cast<int>(plan.tasks().size())),
        iterations_(setup.iterations) {
    validate();
    position_.resize(n_);
    for (int i = 0; i < n_; ++i) position_[schedule_.order()[i]] = i;
    const int executors = static_cast<int>(plan.executors().size());
    group_of_.assign(executors, 0);
    if (!setup.executor_group.empty()) group_of_ = setup.executor_group;
    groups_ = 1 + *std::max_element(group_of_.begin(), group_of_.end());
    pool_of_.assign(executors, -1);
    if (!setup.executor_pool.empty()) pool_of_ = setup.executor_pool;
    free_cores_ = setup.pool_cores;
    sliced_.assign(setup.pool_cores.size(), false);
    for (size_t p = 0; p < setup.pool_time_slicing.size(); ++p)
      sliced_[p] = setup.pool_time_slicing[p];
    running_.assign(setup.pool_cores.size(), {});
    pool_updated_.assign(setup.pool_cores.size(), 0);
    pool_rate_.assign(setup.pool_cores.size(), 1);
    group_tasks_.assign(groups_, 0);
    for (TaskId t = 0; t < n_; ++t) ++group_tasks_[group_of_[plan.tasks()[t].executor]];
    for (TaskId t = 0; t < n_; ++t)
      if (setup.costs[t].collective >= 0) ++collective_members_[setup.costs[t].collective];
  }

  Simulation run() {
    const long instances = static_cast<long>(n_) * iterations_;
    sim_.num_tasks = n_;
    sim_.intervals.assign(instances, {});
    sim_.iteration_start.assign(groups_, std::vector<double>(iterations_, -1));
    sim_.iteration_end.assign(groups_, std::vector<double>(iterations_, 0));
    sim_.executor_busy.assign(plan_.executors().size(), 0);
    sim_.channel_busy.assign(setup_.channels, 0);
    waiting_.assign(instances, 0);
    stamp_.assign(instances, 0);
    ready_at_.assign(instances, 0);
    completed_in_.assign(static_cast<size_t>(groups_) * iterations_, 0);
    ready_.assign(plan_.executors().size(), {});
    executor_free_.assign(plan_.executors().size(), true);
    last_active_.assign(plan_.executors().size(), 0);
    available_at_.assign(plan_.executors().size(), 0);
    in_flight_.assign(plan_.executors().size(), 0);
    flying_.assign(instances, false);
    awaiting_.assign(plan_.executors().size(), {});
    channel_free_.assign(setup_.channels, true);
    waiting_on_.assign(setup_.channels, {});
    hop_.assign(instances, 0);
    sim_.hop_base.assign(n_ + 1, 0);
    for (TaskId t = 0; t < n_; ++t)
      sim_.hop_base[t + 1] = sim_.hop_base[t] + static_cast<int>(setup_.costs[t].channels.size());
    sim_.hop_start.assign(static_cast<size_t>(iterations_) * sim_.hop_base[n_], 0);
    for (long i = 0; i < instances; ++i) {
      const TaskId t = static_cast<TaskId>(i % n_);
      waiting_[i] = schedule_.in_degree(t) + (i >= n_ ? 1 : 0);  // + the iteration's gate
    }
    for (TaskId t = 0; t < n_; ++t)
      if (waiting_[t] == 0) make_ready(t, 0.0, -1);
    dispatch(0.0);
    while (!events_.empty()) {
      const double now = events_.top().time;
      while (!events_.empty() && events_.top().time == now) {
        const Event e = events_.top();
        events_.pop();
        handle(e, now);
      }
      start_transfers(now);
      dispatch(now);
    }
    for (long i = 0; i < instances; ++i)
      CHECK_EQ(waiting_[i], -1) << "simulate: task " << plan_.tasks()[i % n_].name
                                << " never completed";
    for (const auto& ends : sim_.iteration_end)
      for (double end : ends) sim_.makespan = std::max(sim_.makespan, end);
    return std::move(sim_);
  }

 private:
  void validate() {
    require(static_cast<int>(setup_.costs.size()) == n_, "simulate: ", setup_.costs.size(),
            " costs for a plan of ", n_, " tasks");
    require(setup_.iterations >= 1, "simulate: iterations must be at least 1, got ",
            setup_.iterations);
    check_duration(setup_.iteration_gap, "iteration gap", "(all)");
    const size_t executors = plan_.executors().size();
    require(setup_.executor_group.empty() || setup_.executor_group.size() == executors,
            "simulate: ", setup_.executor_group.size(), " executor groups for ", executors,
            " executors");
    require(setup_.executor_pool.empty() || setup_.executor_pool.size() == executors,
            "simulate: ", setup_.executor_pool.size(), " executor pools for ", executors,
            " executors");
    for (int g : setup_.executor_group) require(g >= 0, "simulate: a negative executor group");
    for (int p : setup_.executor_pool)
      require(p < static_cast<int>(setup_.pool_cores.size()), "simulate: executor pool ", p, " of ",
              setup_.pool_cores.size());
    for (int cores : setup_.pool_cores)
      require(cores >= 1, "simulate: a pool needs a core at least, got ", cores);
    require(setup_.pool_time_slicing.size() <= setup_.pool_cores.size(),
            "simulate: ", setup_.pool_time_slicing.size(), " time slicing flags for ",
            setup_.pool_cores.size(), " pools");
    require(setup_.pool_poll_delay.size() <= setup_.pool_cores.size(),
            "simulate: ", setup_.pool_poll_delay.size(), " poll delays for ",
            setup_.pool_cores.size(), " pools");
    for (double d : setup_.pool_poll_delay) check_duration(d, "pool's poll delay", "(all)");
    require(setup_.pool_wake_cost.size() <= setup_.pool_cores.size() &&
                setup_.pool_wake_latency.size() <= setup_.pool_cores.size(),
            "simulate: ", setup_.pool_wake_cost.size(), " wake costs and ",
            setup_.pool_wake_latency.size(), " wake latencies for ", setup_.pool_cores.size(),
            " pools");
    for (double d : setup_.pool_wake_cost) check_duration(d, "pool's wake cost", "(all)");
    for (double d : setup_.pool_wake_latency) check_duration(d, "pool's wake latency", "(all)");
    check_duration(setup_.idle_spin, "idle spin", "(all)");
    for (TaskId t = 0; t < n_; ++t) {
      const Task& task = plan_.tasks()[t];
      require(task.executor != kAnyExecutor, "simulate: task ", task.name,
              " floats over executors (kAnyExecutor), which the simulation does not model; give "
              "it an executor");
      const SimulatedCost& c = setup_.costs[t];
      check_duration(c.busy, "busy time", task.name);
      check_duration(c.latency, "latency", task.name);
      check_duration(c.transfer, "transfer time", task.name);
      for (size_t i = 0; i < c.channels.size(); ++i) {
        const int ch = c.channels[i];
        require(ch >= 0 && ch < setup_.channels, "simulate: task ", task.name, " uses channel ", ch,
                ", not one of the ", setup_.channels, " channels");
        require(std::find(c.channels.begin(), c.channels.begin() + i, ch) == c.channels.begin() + i,
                "simulate: task ", task.name, "'s route passes channel ", ch, " twice");
      }
      require(c.collective < 0 || c.channels.empty(), "simulate: task ", task.name,
              " is collective and uses channels; a collective's time is latency + transfer");
      require(c.poll_rounds >= 0 && (c.poll_rounds == 0 || c.channels.empty()), "simulate: task ",
              task.name, ": poll_rounds must be >= 0, and 0 with channels, got ", c.poll_rounds);
    }
  }

  TaskId task_of(long instance) const { return static_cast<TaskId>(instance % n_); }
  int iteration_of(long instance) const { return static_cast<int>(instance / n_); }
  int group_of_task(TaskId t) const { return group_of_[plan_.tasks()[t].executor]; }

  void push(double time, EventKind kind, long payload, long stamp = -1, int channel = -1) {
    events_.push({time, seq_++, kind, payload, stamp, channel});
  }

  // Time slicing (SimulationSetup::pool_time_slicing): the busy parts and polled rounds running
  // in a pool, each with the work it has left, advancing at the pool's rate.
  struct Running {
    long instance;
    EventKind kind;    // its end: kBusyEnd or kRoundEnd
    double remaining;  // seconds of work at full speed
  };
  int pool_of_instance(long instance) const {
    return pool_of_[plan_.tasks()[task_of(instance)].executor];
  }
  bool sliced(int pool) const { return pool >= 0 && sliced_[pool]; }
  double rate_of(int pool) const {
    const double n = static_cast<double>(running_[pool].size());
    return n <= setup_.pool_cores[pool] ? 1.0 : setup_.pool_cores[pool] / n;
  }
  // Brings the work left up to `now`, at the rate it ran since the last change.
  void advance(int pool, double now) {
    for (Running& r : running_[pool])
      r.remaining = std::max(0.0, r.remaining - (now - pool_updated_[pool]) * pool_rate_[pool]);
    pool_updated_[pool] = now;
  }
  // After a change in what runs: the ends at the new rate (every one, if the rate moved).
  void reschedule(int pool, double now, long changed) {
    const double rate = rate_of(pool);
    const bool all = rate != pool_rate_[pool];
    pool_rate_[pool] = rate;
    for (const Running& r : running_[pool])
      if (all || r.instance == changed)
        push(now + r.remaining / rate, r.kind, r.instance, ++stamp_[r.instance]);
  }
  // Starts `work` seconds of an instance: in its pool's share when time-sliced, else at once.
  void start_work(long instance, double work, EventKind end, double now) {
    const int pool = pool_of_instance(instance);
    if (!sliced(pool)) {
      push(now + work, end, instance);
      return;
    }
    advance(pool, now);
    running_[pool].push_back({instance, end, work});
    reschedule(pool, now, instance);
  }
  // Whether the event ends its instance's work (not a stale end), and if so takes it out.
  bool work_ends(const Event& e, double now) {
    if (e.stamp < 0) return true;
    if (e.stamp != stamp_[e.payload]) return false;
    const int pool = pool_of_instance(e.payload);
    advance(pool, now);
    auto& running = running_[pool];
    running.erase(std::find_if(running.begin(), running.end(),
                               [&](const Running& r) { return r.instance == e.payload; }));
    reschedule(pool, now, -1);
    return true;
  }

  // A task made ready for `e` by the completion of a task of `waker` (-1: the iteration's start).
  void make_ready(long instance, double now, ExecutorId waker) {
    const TaskId t = task_of(instance);
    ready_at_[instance] = now;
    // Task::run_first tasks before the others, each group in topological order; a rank's
    // iterations never overlap, so every key of an iteration sorts before the next one's.
    const long group = plan_.tasks()[t].run_first ? 0 : n_;
    const ExecutorId e = plan_.tasks()[t].executor;
    if (asleep(e, now)) wake(e, waker, now);
    ready_[e].push({position_[t] + group + 2L * n_ * iteration_of(instance), instance});
    consider(e);
  }

  // SimulationSetup::pool_wake_cost and _latency: whether `e` sleeps, having had nothing to do
  // (no task running, ready or in flight) for longer than the idle spin.
  double pool_value(const std::vector<double>& values, int pool) const {
    return pool >= 0 && pool < static_cast<int>(values.size()) ? values[pool] : 0;
  }
  bool asleep(ExecutorId e, double now) const {
    const int pool = pool_of_[e];
    if (pool_value(setup_.pool_wake_cost, pool) == 0 &&
        pool_value(setup_.pool_wake_latency, pool) == 0)
      return false;
    return executor_free_[e] && ready_[e].empty() && awaiting_[e].empty() && in_flight_[e] == 0 &&
           available_at_[e] <= now && now - last_active_[e] > setup_.idle_spin;
  }
  // `e` takes its next task wake latency from now; `waker`, if between tasks, loses wake cost.
  void wake(ExecutorId e, ExecutorId waker, double now) {
    const int pool = pool_of_[e];
    available_at_[e] = last_active_[e] = now + pool_value(setup_.pool_wake_latency, pool);
    push(available_at_[e], EventKind::kAvailable, e);
    if (waker < 0 || waker == e || !executor_free_[waker]) return;
    available_at_[waker] =
        std::max(now, available_at_[waker]) + pool_value(setup_.pool_wake_cost, pool);
    last_active_[waker] = available_at_[waker];
    push(available_at_[waker], EventKind::kAvailable, waker);
  }

  // Keeps `e` among the executors dispatch() looks at while it is free with a ready task or a
  // polled task waiting for it (scanning every executor at every event took a quarter of
  // simulating 24 ranks).
  void consider(ExecutorId e) {
    if (executor_free_[e] && (!ready_[e].empty() || !awaiting_[e].empty())) wanting_.insert(e);
  }

  // Idle executors take their first ready task, pools permitting.
  void dispatch(double now) {
    // Free executors poll their in-flight polled tasks first: the next round, or completion.
    const std::vector<ExecutorId> polling(wanting_.begin(), wanting_.end());
    for (ExecutorId e : polling) {
      if (!executor_free_[e] || awaiting_[e].empty() || available_at_[e] > now) continue;
      last_active_[e] = now;
      std::vector<long> polled;
      polled.swap(awaiting_[e]);
      const int pool = pool_of_[e];
      const double delay = pool >= 0 && pool < static_cast<int>(setup_.pool_poll_delay.size())
                               ? setup_.pool_poll_delay[pool]
                               : 0;
      for (long instance : polled) {
        if (delay > 0 && free_cores_[pool] == 0 && !poll_due_.count(instance)) {
          // Every core is busy: this thread polls when the OS gives it a time slice.
          if (poll_waiting_.insert(instance).second)
            push(now + delay, EventKind::kPollDue, instance);
          awaiting_[e].push_back(instance);
          continue;
        }
        poll_due_.erase(instance);
        poll_waiting_.erase(instance);
        const SimulatedCost& c = setup_.costs[task_of(instance)];
        if (rounds_left_[instance] > 0) {
          --rounds_left_[instance];
          start_work(instance, (c.latency + c.transfer) / c.poll_rounds, EventKind::kRoundEnd, now);
        } else {
          complete(instance, now);
        }
      }
    }
    std::vector<std::tuple<double, ExecutorId>> waiting;
    for (ExecutorId e : wanting_)
      if (executor_free_[e] && !ready_[e].empty() && available_at_[e] <= now)
        waiting.emplace_back(ready_at_[ready_[e].top().second], e);
    std::sort(waiting.begin(), waiting.end());
    for (const auto& [since, e] : waiting) {
      const int pool = pool_of_[e];
      if (pool >= 0 && free_cores_[pool] == 0) continue;
      if (pool >= 0) --free_cores_[pool];
      const long instance = ready_[e].top().second;
      ready_[e].pop();
      executor_free_[e] = false;
      last_active_[e] = now;
      const TaskId t = task_of(instance);
      TaskInterval& in = sim_.intervals[instance];
      in.start = now;
      const int group = group_of_task(t), k = iteration_of(instance);
      double& first = sim_.iteration_start[group][k];
      if (first < 0 || now < first) first = now;
      start_work(instance, setup_.costs[t].busy, EventKind::kBusyEnd, now);
    }
    for (auto it = wanting_.begin(); it != wanting_.end();) {
      const ExecutorId e = *it;
      if (executor_free_[e] && (!ready_[e].empty() || !awaiting_[e].empty()))
        ++it;
      else
        it = wanting_.erase(it);
    }
  }

  void handle(const Event& e, double now) {
    if (e.kind == EventKind::kGateOpen) {
      const int group = static_cast<int>(e.payload / iterations_);
      const int k = static_cast<int>(e.payload % iterations_);
      // The measured gap between runs includes waking the executors: they start awake.
      for (size_t x = 0; x < group_of_.size(); ++x)
        if (group_of_[x] == group) last_active_[x] = std::max(last_active_[x], now);
      for (TaskId t = 0; t < n_; ++t)
        if (group_of_task(t) == group) release(static_cast<long>(k) * n_ + t, now, -1);
      return;
    }
    if (e.kind == EventKind::kAvailable) {
      consider(static_cast<ExecutorId>(e.payload));
      return;
    }
    const long instance = e.payload;
    if ((e.kind == EventKind::kBusyEnd || e.kind == EventKind::kRoundEnd) && !work_ends(e, now))
      return;
    const TaskId t = task_of(instance);
    const SimulatedCost& c = setup_.costs[t];
    const ExecutorId executor = plan_.tasks()[t].executor;
    TaskInterval& in = sim_.intervals[instance];
    if (e.kind == EventKind::kBusyEnd) {
      in.busy_end = now;
      sim_.executor_busy[executor] += c.busy;
      last_active_[executor] = now;
      const int pool = pool_of_[executor];
      if (pool >= 0) ++free_cores_[pool];
      if (!c.hold_executor) {
        executor_free_[executor] = true;
        consider(executor);
        // Until it completes, its thread polls it and does not sleep.
        flying_[instance] = true;
        ++in_flight_[executor];
      }
      if (c.collective >= 0) {
        auto& arrived = arrivals_[{c.collective, iteration_of(instance)}];
        arrived.push_back(instance);
        if (static_cast<int>(arrived.size()) < collective_members_[c.collective]) return;
        for (long member : arrived) {
          const SimulatedCost& mc = setup_.costs[task_of(member)];
          sim_.intervals[member].transfer_start = now;
          if (mc.poll_rounds > 0) {
            await_poll(member, mc.poll_rounds);
          } else {
            push(now + mc.latency + mc.transfer, EventKind::kTransferEnd, member);
          }
        }
        return;
      }
      if (c.channels.empty()) {
        in.transfer_start = now;
        if (c.poll_rounds > 0) {
          await_poll(instance, c.poll_rounds);
        } else if (c.latency + c.transfer == 0) {
          complete(instance, now);
        } else {
          push(now + c.latency + c.transfer, EventKind::kTransferEnd, instance);
        }
        return;
      }
      in.transfer_start = now;  // moved to its start on the first channel
      enter(instance, 0);       // started by start_transfers()
      return;
    }
    if (e.kind == EventKind::kPollDue) {
      poll_due_.insert(instance);
      return;
    }
    if (e.kind == EventKind::kRoundEnd) {
      awaiting_[executor].push_back(instance);
      consider(executor);
      return;
    }
    if (e.kind == EventKind::kChannelFree) {
      channel_free_[e.channel] = true;
      changed_channels_.insert(e.channel);
      return;
    }
    // kTransferEnd
    if (c.hold_executor) {
      executor_free_[executor] = true;
      consider(executor);
    }
    complete(instance, now);
  }

  // A transfer passes the channels of its route in order (SimulatedCost::channels), each a FIFO
  // queue that carries one transfer at a time for its transfer seconds. It joins the next
  // channel's queue when it starts on one (its bytes stream on: cut-through), so a busy channel
  // further on never holds a channel before it, and no transfer waits for a channel it does not
  // use. It completes latency after its last channel is done: latency is the route's delay, not
  // time a channel is taken.
  void enter(long instance, int hop) {
    hop_[instance] = hop;
    const int ch = setup_.costs[task_of(instance)].channels[hop];
    waiting_on_[ch].push_back(instance);
    changed_channels_.insert(ch);
  }

  // Starts the head of every free channel that changed (freed, or reached by a transfer) since
  // the last call, the lowest channel first, until none is left: a start can reach a free channel.
  void start_transfers(double now) {
    while (!changed_channels_.empty()) {
      const int ch = *changed_channels_.begin();
      changed_channels_.erase(changed_channels_.begin());
      if (!channel_free_[ch] || waiting_on_[ch].empty()) continue;
      const long instance = waiting_on_[ch].front();
      waiting_on_[ch].pop_front();
      const TaskId t = task_of(instance);
      const SimulatedCost& c = setup_.costs[t];
      const int hop = hop_[instance];
      channel_free_[ch] = false;
      sim_.channel_busy[ch] += c.transfer;
      sim_.hop_start[static_cast<size_t>(iteration_of(instance)) * sim_.hop_base[n_] +
                     sim_.hop_base[t] + hop] = now;
      if (hop == 0) sim_.intervals[instance].transfer_start = now;
      push(now + c.transfer, EventKind::kChannelFree, instance, -1, ch);
      if (hop + 1 < static_cast<int>(c.channels.size())) {
        enter(instance, hop + 1);
      } else {
        push(now + c.transfer + c.latency, EventKind::kTransferEnd, instance);
      }
    }
  }

  // A polled transfer of `rounds` rounds waits for its executor's first poll.
  void await_poll(long instance, int rounds) {
    rounds_left_[instance] = rounds;
    const ExecutorId e = plan_.tasks()[task_of(instance)].executor;
    awaiting_[e].push_back(instance);
    consider(e);
  }

  void release(long instance, double now, ExecutorId waker) {
    CHECK_GT(waiting_[instance], 0);
    if (--waiting_[instance] == 0) make_ready(instance, now, waker);
  }

  void complete(long instance, double now) {
    const TaskId t = task_of(instance);
    const int k = iteration_of(instance);
    sim_.intervals[instance].end = now;
    waiting_[instance] = -1;
    const ExecutorId executor = plan_.tasks()[t].executor;
    if (flying_[instance]) {
      flying_[instance] = false;
      --in_flight_[executor];
      last_active_[executor] = std::max(last_active_[executor], now);
    }
    const long base = static_cast<long>(k) * n_;
    for (const TaskId* s = schedule_.successors_begin(t); s != schedule_.successors_end(t); ++s)
      release(base + *s, now, executor);
    const int group = group_of_task(t);
    double& end = sim_.iteration_end[group][k];
    end = std::max(end, now);
    if (++completed_in_[static_cast<size_t>(group) * iterations_ + k] == group_tasks_[group] &&
        k + 1 < iterations_)
      push(now + setup_.iteration_gap, EventKind::kGateOpen,
           static_cast<long>(group) * iterations_ + k + 1);
  }

  const Plan& plan_;
  const SimulationSetup& setup_;
  const Schedule schedule_;
  const int n_;
  const int iterations_;
  std::vector<int> position_;
  std::vector<int> group_of_, pool_of_, free_cores_, group_tasks_;
  int groups_ = 1;
  std::map<int, int> collective_members_;
  std::map<std::pair<int, int>, std::vector<long>> arrivals_;

  Simulation sim_;
  std::vector<bool> sliced_;                   // per pool: time slicing
  std::vector<std::vector<Running>> running_;  // per time-sliced pool
  std::vector<double> pool_updated_, pool_rate_;
  std::vector<long> stamp_;   // per instance: its time-sliced end's current stamp
  std::vector<int> waiting_;  // predecessors (and gate) not yet completed; -1: completed
  std::vector<double> ready_at_;
  std::vector<int> completed_in_;
  using Ready = std::pair<long, long>;  // (order key, instance)
  std::vector<std::priority_queue<Ready, std::vector<Ready>, std::greater<Ready>>> ready_;
  std::vector<bool> executor_free_, channel_free_;
  // Per executor (SimulationSetup::pool_wake_cost): when it last started, ended or polled a task,
  // when it may take a task again (after waking up, or waking another), and its tasks in flight
  // (busy part done, transfer not completed: polled, so it does not sleep).
  std::vector<double> last_active_, available_at_;
  std::vector<int> in_flight_;
  std::vector<bool> flying_;                  // per instance: counted in its executor's in_flight_
  std::vector<std::deque<long>> waiting_on_;  // per channel: the transfers waiting, in order
  std::vector<int> hop_;                      // per instance: the channel of its route it is at
  std::set<int> changed_channels_;  // freed, or given a waiting transfer, since the last start
  std::vector<std::vector<long>> awaiting_;  // per executor: polled tasks waiting for a poll
  std::set<ExecutorId> wanting_;  // free executors with a ready or polled task (consider())
  std::map<long, int> rounds_left_;
  std::set<long> poll_waiting_, poll_due_;  // polls put off by a busy pool, and those now due
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  long seq_ = 0;
};

}  // namespace

Simulation simulate(const Plan& plan, const SimulationSetup& setup) {
  return Replay(plan, setup).run();
}

void write_simulation_trace(const Plan& plan, const SimulationSetup& setup, const Simulation& sim,
                            const std::vector<std::string>& channel_names, const std::string& path,
                            int rank) {
  const int executors = static_cast<int>(plan.executors().size());
  require(executors + static_cast<int>(channel_names.size()) <= Tracer::kMaxExecutors,
          "the simulated timeline has ", executors, " executors and ", channel_names.size(),
          " channels, more than a trace's ", Tracer::kMaxExecutors, " threads");
  Tracer tracer;
  const auto at = [](double seconds) {
    return std::chrono::steady_clock::time_point(
        std::chrono::nanoseconds(static_cast<int64_t>(std::llround(seconds * 1e9))));
  };
  for (int k = 0; k < static_cast<int>(sim.intervals.size()) / std::max(1, sim.num_tasks); ++k) {
    for (TaskId t = 0; t < sim.num_tasks; ++t) {
      const Task& task = plan.tasks()[t];
      const TaskInterval& in = sim.at(t, k);
      const SimulatedCost& c = setup.costs[t];
      TaskEvent event{&task.name, &task.location, &plan.executors()[task.executor].name,
                      task.executor, at(in.start)};
      tracer.on_task_start(event);
      event.time = at(c.hold_executor ? in.end : in.busy_end);
      tracer.on_task_end(event);
      for (int hop = 0; hop < static_cast<int>(c.channels.size()); ++hop) {
        const int ch = c.channels[hop];
        const double start = sim.channel_start(t, k, hop);
        TaskEvent transfer{&task.name, &task.location, &channel_names.at(ch), executors + ch,
                           at(start)};
        tracer.on_task_start(transfer);
        transfer.time = at(start + c.transfer);
        tracer.on_task_end(transfer);
      }
    }
  }
  tracer.write_chrome_trace(path, rank);
}

}  // namespace purine::dispatch
