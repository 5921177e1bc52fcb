#include "train/simulation.hpp"

#include <google/protobuf/text_format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "base/error.hpp"
#include "dispatcher/engine.hpp"
#include "dispatcher/simulator.hpp"
#include "purine/compile.hpp"
#include "purine/graph.hpp"
#include "purine/runnable.hpp"
#include "purine/simulation_plan.hpp"
#include "purine/text_format_error.hpp"
#include "train/ring_steps.hpp"
#include "train/trainer.hpp"

namespace purine {
namespace {

constexpr double kUs = 1e-6;
constexpr double kGiga = 1e9;
// DeviceSpeedProto::graph_launch_us when absent.
constexpr double kDefaultGraphLaunchUs = 10;

std::string read_text(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  require(in.good(), what, " '", path, "': cannot open it");
  std::stringstream text;
  text << in.rdbuf();
  require(!in.bad(), what, " '", path, "': cannot read it");
  return text.str();
}

void check_speed(const proto::DeviceSpeedProto& speed, const std::string& where) {
  require(speed.peak_gflops() > 0 && std::isfinite(speed.peak_gflops()), where,
          ".peak_gflops must be positive, got ", speed.peak_gflops());
  require(
      speed.memory_gigabytes_per_second() > 0 && std::isfinite(speed.memory_gigabytes_per_second()),
      where, ".memory_gigabytes_per_second must be positive, got ",
      speed.memory_gigabytes_per_second());
  require(speed.op_overhead_us() >= 0, where, ".op_overhead_us must be >= 0, got ",
          speed.op_overhead_us());
  require(speed.graph_launch_us() >= 0 && std::isfinite(speed.graph_launch_us()), where,
          ".graph_launch_us must be >= 0, got ", speed.graph_launch_us());
}

void check_link(const proto::LinkProto& link, const std::string& where) {
  require(link.gigabytes_per_second() > 0 && std::isfinite(link.gigabytes_per_second()), where,
          ".gigabytes_per_second must be positive, got ", link.gigabytes_per_second());
  require(link.latency_us() >= 0, where, ".latency_us must be >= 0, got ", link.latency_us());
}

// `entries` names the list in errors: "cluster file F: nodes[0].rank_speed".
void check_rank_speeds(const google::protobuf::RepeatedPtrField<proto::RankSpeedProto>& speeds,
                       const std::string& entries) {
  for (int i = 0; i < speeds.size(); ++i) {
    const proto::RankSpeedProto& e = speeds[i];
    const std::string at = str(entries, "[", i, "]");
    require(e.ranks() >= 2, at, ".ranks must be at least 2 (one rank alone has speed 1), got ",
            e.ranks());
    // (require evaluates its message: no speeds[-1].)
    const int before = i == 0 ? 1 : speeds[i - 1].ranks();
    require(e.ranks() > before, at, ".ranks must exceed the entry before's (", before, "), got ",
            e.ranks());
    require(e.speed() > 0 && e.speed() <= 2, at, ".speed must be in (0, 2], got ", e.speed());
  }
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// The value of "key": in one event object of a trace, as text ("" when absent).
std::string field(const std::string& event, const std::string& key) {
  const std::string quoted = "\"" + key + "\":";
  size_t at = event.find(quoted);
  if (at == std::string::npos) return "";
  at += quoted.size();
  if (event[at] == '"') {
    std::string value;
    for (size_t i = at + 1; i < event.size() && event[i] != '"'; ++i) {
      if (event[i] == '\\' && i + 1 < event.size()) {
        ++i;
        value += event[i] == 'n' ? '\n' : event[i] == 't' ? '\t' : event[i];
        continue;
      }
      value += event[i];
    }
    return value;
  }
  const size_t end = event.find_first_of(",}", at);
  return event.substr(at, end - at);
}

std::string without_replica_scope(const std::string& name) {
  static const std::regex scope("replica[0-9]+::");
  return std::regex_replace(name, scope, "");
}

// Where rank r runs and the cluster's channels.
struct Placement {
  struct Node {
    const proto::NodeGroupProto* group;
    int pool;  // the core pool of its CPU
    int nic_tx, nic_rx, memory;
    int first_gpu_channel;  // 4 per GPU: PCIe down, PCIe up, GPU link out, GPU link in
  };
  std::vector<Node> nodes;
  std::vector<int> node_of_rank, slot_of_rank;  // slot: the rank's index on its node
  std::vector<int> pool_of_rank;                // the core pool of its host threads
  std::vector<std::string> channel_names;
  std::vector<int> pool_cores;
  std::vector<double> pool_poll_delay;                    // seconds
  std::vector<double> pool_wake_cost, pool_wake_latency;  // seconds
};

int devices_per_rank(const TrainOptions& o) {
  return o.devices.empty() ? 0 : static_cast<int>(o.devices.size());
}

// A core pool of `cores` cores of a node of `group`.
void add_pool(Placement& p, const proto::NodeGroupProto& group, int cores) {
  p.pool_cores.push_back(cores);
  p.pool_poll_delay.push_back(group.poll_delay_us() * kUs);
  p.pool_wake_cost.push_back(group.wake_cost_us() * kUs);
  p.pool_wake_latency.push_back(group.wake_latency_us() * kUs);
}

Placement place(const proto::ClusterProto& cluster, const TrainOptions& o, bool by_node) {
  Placement p;
  const int gpus_per_rank = devices_per_rank(o);
  std::vector<int> capacity;  // ranks each node takes
  int group_index = 0;
  for (const proto::NodeGroupProto& group : cluster.nodes()) {
    const int count = group.has_count() ? group.count() : 1;
    int per_node = group.ranks_per_node();
    if (per_node == 0)
      per_node = gpus_per_rank > 0 ? std::max(1, group.gpus() / gpus_per_rank)
                                   : std::max(1, group.cores() / std::max(1, o.threads));
    for (int k = 0; k < count; ++k) {
      const std::string name =
          (group.name().empty() ? "node" + std::to_string(group_index) : group.name()) +
          (count > 1 ? "[" + std::to_string(k) + "]" : "");
      Placement::Node node{&group, static_cast<int>(p.pool_cores.size()), 0, 0, 0, 0};
      add_pool(p, group, group.cores());
      auto channel = [&](const std::string& what) {
        p.channel_names.push_back(name + ":" + what);
        return static_cast<int>(p.channel_names.size()) - 1;
      };
      node.nic_tx = channel("nic send");
      node.nic_rx = channel("nic receive");
      node.memory = channel("host memory");
      node.first_gpu_channel = static_cast<int>(p.channel_names.size());
      for (int g = 0; g < group.gpus(); ++g)
        for (const char* what : {"pcie down", "pcie up", "gpu link out", "gpu link in"})
          channel("gpu" + std::to_string(g) + " " + what);
      p.nodes.push_back(node);
      capacity.push_back(per_node);
    }
    ++group_index;
  }
  const auto assign = [&](int id, int slot) {
    const proto::NodeGroupProto& group = *p.nodes[id].group;
    p.node_of_rank.push_back(id);
    p.slot_of_rank.push_back(slot);
    // A bound rank's threads take turns on its own cores.
    p.pool_of_rank.push_back(group.cores_per_rank() > 0 ? static_cast<int>(p.pool_cores.size())
                                                        : p.nodes[id].pool);
    if (group.cores_per_rank() > 0) add_pool(p, group, group.cores_per_rank());
  };
  const auto placed = [&] { return static_cast<int>(p.node_of_rank.size()); };
  const int nodes = static_cast<int>(p.nodes.size());
  const int most = capacity.empty() ? 0 : *std::max_element(capacity.begin(), capacity.end());
  if (by_node) {  // mpirun --map-by node: one rank on each node in turn
    for (int slot = 0; slot < most && placed() < o.ranks; ++slot)
      for (int id = 0; id < nodes && placed() < o.ranks; ++id)
        if (slot < capacity[id]) assign(id, slot);
  } else {  // mpirun's default: each node filled in order
    for (int id = 0; id < nodes && placed() < o.ranks; ++id)
      for (int slot = 0; slot < capacity[id] && placed() < o.ranks; ++slot) assign(id, slot);
  }
  require(static_cast<int>(p.node_of_rank.size()) >= o.ranks, "impossible layout: ", o.ranks,
          " ranks, but the cluster '", cluster.name(), "' takes ", p.node_of_rank.size(),
          " (its nodes' ranks_per_node, or their GPUs / --devices, or cores / --threads); add "
          "nodes or give fewer ranks");
  if (gpus_per_rank > 0)
    for (int r = 0; r < o.ranks; ++r) {
      const Placement::Node& node = p.nodes[p.node_of_rank[r]];
      require((p.slot_of_rank[r] + 1) * gpus_per_rank <= node.group->gpus(),
              "impossible layout: rank ", r, " needs ", gpus_per_rank, " GPUs on a node of '",
              node.group->name(), "' with ", node.group->gpus(), " (ranks_per_node ",
              node.group->ranks_per_node(), ")");
    }
  return p;
}

// The physical GPU of a location's device on its node.
int gpu_of(const Placement& p, const TrainOptions& o, const Location& l) {
  const auto it = std::find(o.devices.begin(), o.devices.end(), l.device);
  const int index = it == o.devices.end() ? l.device : static_cast<int>(it - o.devices.begin());
  return p.slot_of_rank[l.rank] * std::max(1, devices_per_rank(o)) + index;
}

// An op's roofline: the longer of its FLOPs at the device's peak and its bytes at its memory
// bandwidth (`variable`), and the fixed overhead of its launch.
struct Roofline {
  double variable = 0, overhead = 0;
  double seconds() const { return variable + overhead; }
  // Its size, not its launch, sets its time.
  bool sized() const { return variable >= overhead; }
};

struct Route {
  std::vector<int> channels;
  double latency = 0;
  double bandwidth = 0;  // bytes per second, the slowest link's
};

void through(Route& route, int channel, const proto::LinkProto& link) {
  route.channels.push_back(channel);
  route.latency += link.latency_us() * kUs;
  const double bw = link.gigabytes_per_second() * kGiga;
  route.bandwidth = route.bandwidth == 0 ? bw : std::min(route.bandwidth, bw);
}

Route route(const Placement& p, const TrainOptions& o, const proto::ClusterProto& cluster,
            const Location& from, const Location& to) {
  Route r;
  const Placement::Node& a = p.nodes[p.node_of_rank[from.rank]];
  const Placement::Node& b = p.nodes[p.node_of_rank[to.rank]];
  const proto::NodeGroupProto& ga = *a.group;
  const proto::NodeGroupProto& gb = *b.group;
  if (!from.is_cpu() && !to.is_cpu() && &a == &b && ga.has_gpu_link()) {
    through(r, a.first_gpu_channel + 4 * gpu_of(p, o, from) + 2, ga.gpu_link());
    through(r, a.first_gpu_channel + 4 * gpu_of(p, o, to) + 3, ga.gpu_link());
    return r;
  }
  if (!from.is_cpu()) through(r, a.first_gpu_channel + 4 * gpu_of(p, o, from) + 1, ga.pcie());
  if (from.rank != to.rank || (from.is_cpu() && to.is_cpu())) {
    if (&a == &b) {
      through(r, a.memory, ga.host_memory());
    } else {
      through(r, a.nic_tx, cluster.network());
      through(r, b.nic_rx, cluster.network());
      r.latency -= cluster.network().latency_us() * kUs;  // one network latency, not two
    }
  }
  if (!to.is_cpu()) through(r, b.first_gpu_channel + 4 * gpu_of(p, o, to), gb.pcie());
  return r;
}

double images_per_step(const TrainOptions& o) {
  const bool replicated =
      o.parallel == ParallelLayout::kData || o.parallel == ParallelLayout::kHybrid;
  return static_cast<double>(o.batch) * (replicated ? o.ranks : 1);
}

std::vector<Shape> shapes(const std::vector<Blob*>& blobs) {
  std::vector<Shape> out;
  for (const Blob* b : blobs) out.push_back(b->shape());
  return out;
}

std::string shape_key(const SimulatedTask& t) {
  std::ostringstream key;
  key << t.op->type() << '|' << t.role << '|' << (t.at.is_cpu() ? "cpu" : "gpu");
  for (const Blob* b : t.op->inputs()) key << '|' << b->shape();
  key << "->";
  for (const Blob* b : t.op->outputs()) key << '|' << b->shape();
  return key.str();
}

// The costs of every task, and what the report says of them.
struct CostModel {
  dispatch::SimulationSetup setup;
  SimulationReport report;
};

// `recorded`: the tasks of the ranks whose runs replay a device graph (device_graph_tasks), in
// the plan's order.
CostModel model_costs(const SimulationPlan& sp, const SimulateOptions& options, const Placement& p,
                      const std::vector<dispatch::TaskId>& recorded) {
  const TrainOptions& o = options.train;
  const proto::ClusterProto& cluster = options.cluster;
  CostModel m;
  dispatch::SimulationSetup& setup = m.setup;
  SimulationReport& report = m.report;
  const int n = static_cast<int>(sp.tasks.size());
  // Compute threads per CPU location, as compile() gives them.
  std::map<int, int> cpu_locations;  // per rank
  {
    std::set<Location> seen;
    for (const SimulatedTask& t : sp.tasks)
      if (t.at.is_cpu() && seen.insert(t.at).second) ++cpu_locations[t.at.rank];
  }
  // Per node, its ranks' compute speed with all of them placed there (NodeGroupProto.rank_speed):
  // each CPU location of a rank computes at once with the others, as a rank does.
  std::vector<int> computing_on(p.nodes.size(), 0);
  for (int r = 0; r < o.ranks; ++r)
    computing_on[p.node_of_rank[r]] += std::max(1, cpu_locations[r]);
  std::vector<double> node_speed;
  for (size_t k = 0; k < p.nodes.size(); ++k) {
    node_speed.push_back(rank_speed_at(*p.nodes[k].group, computing_on[k]));
    if (computing_on[k] > 0) report.rank_speed = std::min(report.rank_speed, node_speed.back());
  }
  setup.costs.assign(n, {});
  setup.channels = static_cast<int>(p.channel_names.size());
  setup.pool_cores = p.pool_cores;
  setup.pool_poll_delay = p.pool_poll_delay;
  setup.pool_wake_cost = p.pool_wake_cost;
  setup.pool_wake_latency = p.pool_wake_latency;
  setup.idle_spin = std::chrono::duration<double>(dispatch::EngineOptions{}.idle_spin).count();
  // A non-blocking collective's transfer is done by its polling thread (MPI_Test copies and sums
  // in shared memory), which takes its share of the node's cores.
  setup.pool_time_slicing.assign(p.pool_cores.size(), options.time_slicing);
  setup.executor_group = sp.executor_rank;
  for (const Location& l : sp.executor_location)
    setup.executor_pool.push_back(l.is_cpu() ? p.pool_of_rank[l.rank] : -1);

  // A location's device and how many of its units (cores) an op uses: at a CPU location its
  // rank's threads shared among the rank's `cpu_locations` CPU locations.
  auto device = [&](const Location& l,
                    int locations) -> std::pair<const proto::DeviceSpeedProto*, double> {
    const proto::NodeGroupProto& g = *p.nodes[p.node_of_rank[l.rank]].group;
    if (!l.is_cpu()) return {&g.gpu(), 1.0};
    const int threads = std::max(1, o.threads / std::max(1, locations));
    return {&g.cpu(), static_cast<double>(std::min(threads, std::max(1, g.cores())))};
  };
  // The roofline, with the op's fixed overhead unless a device graph launches it. A copy between
  // two CPU locations of one rank is a memcpy of its thread: it reads and writes its bytes.
  auto roofline = [&](const SimulatedTask& t, int locations, bool launched = true) {
    const auto [speed, units] = device(t.at, locations);
    const OpCost c = t.op->kernel().cost(shapes(t.op->inputs()), shapes(t.op->outputs()));
    const double bytes = t.role == SimulatedTask::kCopy ? 2 * c.bytes : c.bytes;
    return Roofline{std::max(c.flops / (speed->peak_gflops() * kGiga * units),
                             bytes / (speed->memory_gigabytes_per_second() * kGiga)),
                    launched ? speed->op_overhead_us() * kUs : 0.0};
  };
  auto overhead = [&](const SimulatedTask& t) {
    return device(t.at, 1).first->op_overhead_us() * kUs;
  };

  // Calibration. The trace's tasks by name, and by name without the replica scope.
  const TraceTimes* trace = options.calibration ? &*options.calibration : nullptr;
  std::map<std::string, double> by_plain_name;
  if (trace)
    for (const auto& [name, seconds] : trace->seconds)
      by_plain_name.emplace(without_replica_scope(name), seconds);
  auto traced = [&](const std::string& name) {
    auto it = trace->seconds.find(name);
    if (it != trace->seconds.end()) return it->second;
    auto plain = by_plain_name.find(without_replica_scope(name));
    return plain != by_plain_name.end() ? plain->second : -1.0;
  };
  // What the trace says by op type and shapes, and per op type how far the roofline is, learnt
  // on the graph the trace's run had: this layout on one rank, one location, no pipeline, split
  // or micro-batches (the plain `purine train --trace` run). A type's ratio is learnt apart on
  // its sized and its small ops (Roofline::sized): the ratio of a few microseconds of launch
  // says nothing of a memory-bound op of megabytes (one check-sum of 4 floats made the gradient
  // sums of 2 CPU locations 20x too slow).
  std::map<std::string, double> by_name_and_shape, by_shape;
  std::map<std::pair<std::string, bool>, std::pair<double, double>> by_type;  // measured, roofline
  // A name without its replica scope, with the shapes: an op of another batch is another op.
  auto named_key = [](const std::string& name, const SimulatedTask& task) {
    return without_replica_scope(name) + "#" + shape_key(task);
  };
  double measured_sum = 0, roofline_sum = 0;
  if (trace) {
    // The traced run had this layout on one rank and location, without or with this layout's
    // micro-batches (gradient accumulation), or with as many as it has locations times those (a
    // location's share of the batch: its ops' shapes): the variant whose names the trace has the
    // most of.
    std::set<int> variants{1, o.micro_batches};
    const int per_location = o.micro_batches * std::max(1, o.locations);
    if (o.batch % per_location == 0) variants.insert(per_location);
    std::unique_ptr<Graph> best_graph;
    int best_matches = -1;
    for (int micro : variants) {
      TrainOptions c = o;
      c.ranks = 1;
      c.parallel = ParallelLayout::kData;
      c.stages = 1;
      c.virtual_stages = 1;
      c.micro_batches = micro;
      c.split.clear();
      c.locations = 1;
      if (!c.devices.empty()) c.devices = {c.devices[0]};
      std::unique_ptr<Graph> graph = build_training_graph(c);
      int matches = 0;
      for (const auto& op : graph->ops()) matches += traced(op->name()) >= 0 ? 1 : 0;
      if (matches > best_matches) {
        best_matches = matches;
        best_graph = std::move(graph);
      }
    }
    const SimulationPlan cp = build_simulation_plan(*best_graph);
    std::set<std::string> reported;
    for (size_t t = 0; t < cp.tasks.size(); ++t) {
      const SimulatedTask& task = cp.tasks[t];
      if (task.role != SimulatedTask::kCompute || task.view) continue;
      const double seconds = traced(cp.plan.tasks()[t].name);
      if (seconds < 0) continue;
      by_name_and_shape.emplace(named_key(cp.plan.tasks()[t].name, task), seconds);
      by_shape.emplace(shape_key(task), seconds);
      // With the threads per location of the simulated layout: the trace's run had them.
      const Roofline r = roofline(task, cpu_locations[0]);
      const double modelled = r.seconds();
      auto& sums = by_type[{task.op->type(), r.sized()}];
      sums.first += seconds;
      sums.second += modelled;
      measured_sum += seconds;
      roofline_sum += modelled;
      if (reported.insert(without_replica_scope(cp.plan.tasks()[t].name)).second)
        report.op_errors.push_back({cp.plan.tasks()[t].name, seconds, modelled});
    }
  }
  report.roofline_scale = roofline_sum > 0 ? measured_sum / roofline_sum : 1;
  for (OpError& e : report.op_errors) e.modelled *= report.roofline_scale;
  std::vector<double> measured(n, -1);
  if (trace)
    for (int t = 0; t < n; ++t) {
      auto it = by_name_and_shape.find(named_key(sp.plan.tasks()[t].name, sp.tasks[t]));
      if (it != by_name_and_shape.end()) measured[t] = it->second;
    }

  std::vector<bool> in_graph(n, false);
  for (const dispatch::TaskId t : recorded) in_graph[t] = true;

  // Collectives: the k-th ordered op of every rank forms collective k (the ranks start them in
  // one order, the resource chain's: the plan's task ids follow a topological order).
  std::map<int, int> ordered_seen;  // per rank
  for (int t = 0; t < n; ++t) {
    const SimulatedTask& task = sp.tasks[t];
    dispatch::SimulatedCost& c = setup.costs[t];
    const OperatorTraits traits = task.op->kernel().traits();
    if (task.view) {
      ++report.views;
      continue;
    }
    const bool host_copy = task.role == SimulatedTask::kCopy && task.at.is_cpu() &&
                           task.op->inputs()[0]->location().is_cpu();
    const bool transfer =
        task.role == SimulatedTask::kSend || (task.role == SimulatedTask::kCopy && !host_copy);
    const bool receive = task.role == SimulatedTask::kReceive;
    if (transfer || receive) {
      ++report.transfers;
      c.busy = measured[t] >= 0 ? measured[t] : in_graph[t] ? 0.0 : overhead(task);
      if (receive) continue;
      const Location from = task.op->inputs()[0]->location(), to = task.op->location();
      const Route r = route(p, o, cluster, from, to);
      const double bytes =
          task.op->kernel().cost(shapes(task.op->inputs()), shapes(task.op->outputs())).bytes;
      c.channels = r.channels;
      c.latency = r.latency;
      c.transfer = r.bandwidth > 0 ? bytes / r.bandwidth : 0;
      // A copy within a rank to or from a GPU runs on its thread (the GPU's stream).
      c.hold_executor = task.role == SimulatedTask::kCopy;
      if (c.hold_executor && measured[t] >= 0) c.busy = 0;  // the trace timed the copy itself
      continue;
    }
    const Roofline r = roofline(task, cpu_locations[task.at.rank], !in_graph[t]);
    const double modelled = r.seconds();
    // The ratio of the traced ops of its type and size class; a small op may take the sized
    // ops' one, a sized op never the small ops'.
    auto type = by_type.find({task.op->type(), r.sized()});
    if (type == by_type.end() && !r.sized()) type = by_type.find({task.op->type(), true});
    if (measured[t] >= 0) {
      c.busy = measured[t];
      ++report.by_name;
    } else if (by_shape.count(shape_key(task))) {
      c.busy = by_shape.at(shape_key(task));
      ++report.by_shape;
    } else if (type != by_type.end() && type->second.second > 0) {
      c.busy = type->second.first / type->second.second * modelled;
      ++report.by_type;
    } else {
      c.busy = report.roofline_scale * modelled;
      ++report.by_roofline;
    }
    // A CPU op computes slower while the node's other ranks compute too (shared memory).
    if (task.at.is_cpu() && !traits.communicates)
      c.busy /= node_speed[p.node_of_rank[task.at.rank]];
    if (traits.ordered_across_ranks && traits.communicates) {
      // An allreduce over every rank: a ring's 2(N-1) steps over the slowest link it crosses.
      c.collective = ordered_seen[task.at.rank]++;
      const double bytes = 4.0 * task.op->outputs()[0]->shape().count();
      const int ranks = std::max(1, sp.ranks);
      Route slowest;
      for (int r = 1; r < ranks; ++r) {
        const Route hop = route(p, o, cluster, Location::cpu(r - 1), Location::cpu(r));
        if (slowest.bandwidth == 0 || hop.bandwidth < slowest.bandwidth) slowest = hop;
      }
      if (ranks > 1 && slowest.bandwidth > 0) {
        c.latency = 2.0 * (ranks - 1) * slowest.latency;
        c.transfer = 2.0 * (ranks - 1) / ranks * bytes / slowest.bandwidth;
        // A non-blocking collective progresses only inside MPI calls: the executor's polls
        // between its tasks (libnbc's rounds, recursive doubling: log2 N of them).
        c.poll_rounds = static_cast<int>(std::ceil(std::log2(ranks)));
      }
    }
  }
  // A recorded run: its ops pay their device time only (above), and the recording's launch
  // delays the first of them on each of its GPU's streams (the graph's roots start together).
  std::set<dispatch::ExecutorId> launched;
  for (const dispatch::TaskId t : recorded) {
    const dispatch::ExecutorId e = sp.plan.tasks()[t].executor;
    if (!launched.insert(e).second) continue;
    const proto::DeviceSpeedProto& gpu = *device(sp.tasks[t].at, 1).first;
    setup.costs[t].busy +=
        (gpu.has_graph_launch_us() ? gpu.graph_launch_us() : kDefaultGraphLaunchUs) * kUs;
  }
  report.device_graph_tasks = static_cast<int>(recorded.size());
  std::sort(report.op_errors.begin(), report.op_errors.end(),
            [](const OpError& a, const OpError& b) { return a.measured > b.measured; });
  setup.iterations = std::max(2, options.iterations);
  setup.iteration_gap = trace ? trace->gap_seconds : cluster.iteration_overhead_us() * kUs;
  report.iteration_gap_seconds = setup.iteration_gap;
  if (trace) report.calibration_step_seconds = trace->step_seconds;
  return m;
}

// The step: rank 0's iterations, start to start, over all but the first.
double step_of(const dispatch::Simulation& sim) {
  const auto& starts = sim.iteration_start[0];
  const int k = static_cast<int>(starts.size());
  double step = 0;
  for (int r = 0; r < static_cast<int>(sim.iteration_end.size()); ++r) {
    const auto& ends = sim.iteration_end[r];
    step = std::max(step, (ends[k - 1] - ends[0]) / (k - 1));
  }
  return step;
}

}  // namespace

proto::ClusterProto parse_cluster(const std::string& text, const std::string& source) {
  proto::ClusterProto cluster;
  google::protobuf::TextFormat::Parser parser;
  FirstTextFormatError error;
  parser.RecordErrorsTo(&error);
  const bool parsed = parser.ParseFromString(text, &cluster);  // before reading `error`
  require(parsed, "cluster file ", source, ":", error.line(), ":", error.column(), ": ",
          error.message());
  require(cluster.nodes_size() > 0, "cluster file ", source, ": no nodes (add a `nodes { ... }`)");
  for (int i = 0; i < cluster.nodes_size(); ++i) {
    const proto::NodeGroupProto& g = cluster.nodes(i);
    const std::string where = str("cluster file ", source, ": nodes[", i, "]",
                                  g.name().empty() ? "" : " ('" + g.name() + "')");
    require(!g.has_count() || g.count() >= 1, where, ".count must be at least 1, got ", g.count());
    require(g.cores() >= 1, where, ".cores must be at least 1, got ", g.cores());
    require(g.has_cpu(), where, " has no cpu { peak_gflops memory_gigabytes_per_second }");
    check_speed(g.cpu(), where + ".cpu");
    require(g.gpus() >= 0, where, ".gpus must be >= 0, got ", g.gpus());
    require(g.ranks_per_node() >= 0, where, ".ranks_per_node must be >= 0, got ",
            g.ranks_per_node());
    require(g.poll_delay_us() >= 0 && std::isfinite(g.poll_delay_us()), where,
            ".poll_delay_us must be >= 0, got ", g.poll_delay_us());
    require(g.wake_cost_us() >= 0 && std::isfinite(g.wake_cost_us()), where,
            ".wake_cost_us must be >= 0, got ", g.wake_cost_us());
    require(g.wake_latency_us() >= 0 && std::isfinite(g.wake_latency_us()), where,
            ".wake_latency_us must be >= 0, got ", g.wake_latency_us());
    require(g.cores_per_rank() >= 0 && g.cores_per_rank() <= g.cores(), where,
            ".cores_per_rank must be in [0, cores = ", g.cores(), "], got ", g.cores_per_rank());
    check_rank_speeds(g.rank_speed(), where + ".rank_speed");
    if (g.gpus() > 0) {
      require(g.has_gpu() && g.has_pcie(), where, " has ", g.gpus(),
              " GPUs: it needs gpu { ... } and pcie { ... }");
      check_speed(g.gpu(), where + ".gpu");
      check_link(g.pcie(), where + ".pcie");
      if (g.has_gpu_link()) check_link(g.gpu_link(), where + ".gpu_link");
    }
    require(g.has_host_memory(), where, " has no host_memory { latency_us gigabytes_per_second }");
    check_link(g.host_memory(), where + ".host_memory");
  }
  int nodes = 0;
  for (const auto& g : cluster.nodes()) nodes += g.has_count() ? g.count() : 1;
  if (nodes > 1 || cluster.has_network()) {
    require(cluster.has_network(), "cluster file ", source, ": ", nodes,
            " nodes need network { latency_us gigabytes_per_second }");
    check_link(cluster.network(), str("cluster file ", source, ": network"));
  }
  require(cluster.iteration_overhead_us() >= 0, "cluster file ", source,
          ": iteration_overhead_us must be >= 0, got ", cluster.iteration_overhead_us());
  return cluster;
}

proto::ClusterProto fit_device_speed(const SimulateOptions& options, double images_per_second,
                                     double* factor) {
  require(images_per_second > 0 && std::isfinite(images_per_second),
          "the img/s to fit must be positive, got ", images_per_second);
  const bool gpu = !options.train.devices.empty();
  SimulateOptions one = options;
  one.train.ranks = 1;
  one.trace_path.clear();
  auto scaled = [&](double k) {
    proto::ClusterProto c = options.cluster;
    for (proto::NodeGroupProto& g : *c.mutable_nodes()) {
      proto::DeviceSpeedProto& d = gpu ? *g.mutable_gpu() : *g.mutable_cpu();
      d.set_peak_gflops(d.peak_gflops() * k);
      d.set_memory_gigabytes_per_second(d.memory_gigabytes_per_second() * k);
    }
    return c;
  };
  auto rate = [&](double k) {
    one.cluster = scaled(k);
    return simulate_training(one).images_per_second;
  };
  // Bracket the factor, then bisect in log space.
  double lo = 1, hi = 1;
  double at_lo = rate(1), at_hi = at_lo;
  for (int i = 0; i < 40 && at_lo > images_per_second; ++i) at_lo = rate(lo /= 4);
  for (int i = 0; i < 40 && at_hi < images_per_second; ++i) at_hi = rate(hi *= 4);
  require(at_hi >= images_per_second, "cannot fit ", images_per_second, " img/s: devices ", hi,
          " times as fast still give ", at_hi,
          " img/s (the ops' fixed overheads, op_overhead_us, take longer)");
  require(at_lo <= images_per_second, "cannot fit ", images_per_second, " img/s: devices ", lo,
          " times as fast still give ", at_lo, " img/s");
  for (int i = 0; i < 60 && hi / lo > 1 + 1e-6; ++i) {
    const double mid = std::sqrt(lo * hi);
    (rate(mid) < images_per_second ? lo : hi) = mid;
  }
  *factor = std::sqrt(lo * hi);
  return scaled(*factor);
}

double rank_speed_at(const proto::NodeGroupProto& group, int ranks) {
  int below_ranks = 1;
  double below_speed = 1;
  for (const proto::RankSpeedProto& e : group.rank_speed()) {
    if (ranks <= e.ranks())
      return below_speed +
             (e.speed() - below_speed) * (ranks - below_ranks) / (e.ranks() - below_ranks);
    below_ranks = e.ranks();
    below_speed = e.speed();
  }
  return ranks <= 1 ? 1.0 : below_speed;
}

void set_rank_speeds(proto::ClusterProto& cluster, const std::string& text) {
  google::protobuf::RepeatedPtrField<proto::RankSpeedProto> speeds;
  std::istringstream entries(text);
  std::string entry;
  while (std::getline(entries, entry, ',')) {
    const size_t colon = entry.find(':');
    char* end = nullptr;
    proto::RankSpeedProto e;
    bool ok = colon != std::string::npos && colon > 0;
    if (ok) {
      const long ranks = std::strtol(entry.c_str(), &end, 10);
      ok = end == entry.c_str() + colon;
      e.set_ranks(static_cast<int>(ranks));
      const double speed = std::strtod(entry.c_str() + colon + 1, &end);
      ok = ok && colon + 1 < entry.size() && end == entry.c_str() + entry.size();
      e.set_speed(speed);
    }
    require(ok, "--rank-speed: '", entry, "' is not RANKS:SPEED (e.g. 8:0.82)");
    *speeds.Add() = e;
  }
  require(!speeds.empty(), "--rank-speed: no entries; give RANKS:SPEED,... (e.g. 2:0.94,8:0.82)");
  check_rank_speeds(speeds, "--rank-speed, entry");
  for (proto::NodeGroupProto& g : *cluster.mutable_nodes()) *g.mutable_rank_speed() = speeds;
}

void set_wake_costs(proto::ClusterProto& cluster, const std::string& text) {
  const size_t colon = text.find(':');
  char* end = nullptr;
  double cost = -1, latency = -1;
  if (colon != std::string::npos && colon > 0 && colon + 1 < text.size()) {
    cost = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + colon) cost = -1;
    latency = std::strtod(text.c_str() + colon + 1, &end);
    if (end != text.c_str() + text.size()) latency = -1;
  }
  require(cost >= 0 && latency >= 0 && std::isfinite(cost) && std::isfinite(latency),
          "--wake-us: '", text,
          "' is not COST:LATENCY, two microsecond figures >= 0 (e.g. 31.6:100)");
  for (proto::NodeGroupProto& g : *cluster.mutable_nodes()) {
    g.set_wake_cost_us(cost);
    g.set_wake_latency_us(latency);
  }
}

void set_cores_per_rank(proto::ClusterProto& cluster, int cores) {
  for (int i = 0; i < cluster.nodes_size(); ++i) {
    proto::NodeGroupProto& g = *cluster.mutable_nodes(i);
    require(cores >= 0 && cores <= g.cores(), "--cores-per-rank must be in [0, cores = ", g.cores(),
            "] of nodes[", i, "]", g.name().empty() ? "" : " ('" + g.name() + "')", ", got ",
            cores);
    g.set_cores_per_rank(cores);
  }
}

proto::ClusterProto load_cluster(const std::string& path) {
  return parse_cluster(read_text(path, "cluster file"), path);
}

proto::ClusterProto default_cluster() {
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  return parse_cluster(
      str("name: \"this machine (", cores, " cores, default speeds)\"\n", "nodes { cores: ", cores,
          " cpu { peak_gflops: 50 memory_gigabytes_per_second: 10 "
          "op_overhead_us: 5 } host_memory { latency_us: 2 "
          "gigabytes_per_second: 5 } }\n"),
      "(default)");
}

TraceTimes read_trace_times(const std::string& path, const std::string& what) {
  const std::string text = read_text(path, what);
  TraceTimes times;
  times.path = path;
  require(text.find("\"traceEvents\"") != std::string::npos, what, " '", path,
          "' is not a Chrome trace (no \"traceEvents\"); give a file purine train --trace wrote");
  struct Run {
    double start = 1e300, end = -1e300;
  };
  std::map<std::string, std::vector<double>> durations;
  std::vector<Run> runs;
  // Events are objects on lines of their own, as the tracer writes them.
  std::istringstream lines(text);
  std::string line;
  std::map<std::string, int> seen;
  // Occurrences are counted per executor row in time order; the tracer writes each executor's
  // events in order, so the i-th occurrence of a name is its run i.
  while (std::getline(lines, line)) {
    if (line.find("\"ph\":\"X\"") == std::string::npos) continue;
    const std::string name = field(line, "name");
    const std::string ts = field(line, "ts"), dur = field(line, "dur");
    require(!name.empty() && !ts.empty() && !dur.empty(), what, " '", path,
            "': an event without name, ts or dur: ", line.substr(0, 120));
    const double start = std::stod(ts) * kUs, seconds = std::stod(dur) * kUs;
    durations[name].push_back(seconds);
    const int run = seen[name]++;
    if (run >= static_cast<int>(runs.size())) runs.resize(run + 1);
    runs[run].start = std::min(runs[run].start, start);
    runs[run].end = std::max(runs[run].end, start + seconds);
  }
  require(!durations.empty(), what, " '", path, "' has no task events");
  for (auto& [name, list] : durations) times.seconds[name] = median(list);
  times.iterations = static_cast<int>(runs.size());
  std::vector<double> steps, gaps;
  for (size_t i = 1; i < runs.size(); ++i) {
    steps.push_back(runs[i].start - runs[i - 1].start);
    gaps.push_back(std::max(0.0, runs[i].start - runs[i - 1].end));
  }
  times.step_seconds = median(steps);
  times.gap_seconds = median(gaps);
  return times;
}

SimulationReport simulate_training(const SimulateOptions& options) {
  TrainOptions o = options.train;
  o.rank = 0;
  o.evaluate = false;
  require(o.ranks >= 1, "--ranks must be at least 1, got ", o.ranks);
  const Placement placement = place(options.cluster, o, options.ranks_by_node);
  std::string ring_steps_reason;
  o.machine_of_rank = placement.node_of_rank;
  if (options.automatic_ring_steps) {
    const RingStepsChoice choice = choose_ring_steps(placement.node_of_rank, replicas_per_rank(o));
    o.ring_steps = choice.steps;
    ring_steps_reason = choice.reason();
  }
  std::set<const Blob*> observed;
  std::vector<PipelineStage> stages;
  std::unique_ptr<Graph> graph = build_training_graph(o, &observed, &stages);
  // compile()'s memory-plan orders on every rank, as purine train --reuse-memory makes them.
  SimulationPlanOptions plan_options;
  if (o.reuse_memory) plan_options.memory_orders = memory_plan_orders(*graph, observed);
  const SimulationPlan sp = build_simulation_plan(*graph, plan_options);
  // The ranks whose runs replay a device graph, by the Runnable's rule.
  std::set<int> recording;
  if (o.cuda_graph)
    for (int r = 0; r < o.ranks; ++r)
      if (device_graphs_refusal(*graph, r, o.mode, /*compiled=*/false).empty()) recording.insert(r);
  CostModel model = model_costs(sp, options, placement, device_graph_tasks(sp, recording));
  SimulationReport report = std::move(model.report);
  report.ring_steps = o.ring_steps;
  report.ring_steps_reason = ring_steps_reason;
  report.pipeline_stages = std::move(stages);
  report.ranks = o.ranks;
  std::set<int> nodes(placement.node_of_rank.begin(), placement.node_of_rank.end());
  report.nodes = static_cast<int>(nodes.size());
  report.tasks = static_cast<int>(sp.tasks.size());
  const dispatch::Simulation sim = dispatch::simulate(sp.plan, model.setup);
  report.step_seconds = step_of(sim);
  report.images_per_second = images_per_step(o) / report.step_seconds;
  // Without communication: every transfer and collective free.
  dispatch::SimulationSetup free = model.setup;
  for (int t = 0; t < static_cast<int>(sp.tasks.size()); ++t) {
    const SimulatedTask& task = sp.tasks[t];
    dispatch::SimulatedCost& c = free.costs[t];
    if (task.role == SimulatedTask::kSend || c.collective >= 0) {
      c.latency = c.transfer = 0;
      c.channels.clear();
    }
  }
  const double alone = step_of(dispatch::simulate(sp.plan, free));
  report.exposed_communication = std::max(0.0, 1 - alone / report.step_seconds);
  const double span = sim.makespan;
  for (size_t e = 0; e < sp.executor_rank.size(); ++e) {
    if (sp.executor_rank[e] != 0) continue;
    const double share = sim.executor_busy[e] / std::max(1e-12, span);
    if (share > report.busiest_executor_share) {
      report.busiest_executor_share = share;
      report.busiest_executor = sp.plan.executors()[e].name;
    }
  }
  for (size_t ch = 0; ch < sim.channel_busy.size(); ++ch) {
    const double share = sim.channel_busy[ch] / std::max(1e-12, span);
    if (share > report.busiest_link_share) {
      report.busiest_link_share = share;
      report.busiest_link = placement.channel_names[ch];
    }
  }
  if (o.stages > 1) {
    // Rank 0's runs (stage 0 starts first and ends last), and the busiest main thread.
    const int runs = static_cast<int>(sim.iteration_start[0].size());
    double span = 0;
    for (int k = 1; k < runs; ++k) span += sim.iteration_end[0][k] - sim.iteration_start[0][k];
    span /= std::max(1, runs - 1);
    double busiest = 0;
    for (size_t e = 0; e < sp.executor_rank.size(); ++e) {
      const std::string& name = sp.plan.executors()[e].name;
      if (name.size() >= 5 && name.compare(name.size() - 5, 5, "/main") == 0)
        busiest = std::max(busiest, sim.executor_busy[e] / runs);
    }
    report.pipeline_bubble = span > 0 ? std::max(0.0, 1 - busiest / span) : 0;
  }
  if (!options.trace_path.empty())
    dispatch::write_simulation_trace(sp.plan, model.setup, sim, placement.channel_names,
                                     options.trace_path);
  return report;
}

}  // namespace purine
