// Simulated training: the global graph `purine train` builds for a layout over any number of
// ranks (build_training_graph, without memory), turned into one dispatcher plan of every rank
// (purine/simulation_plan.hpp), its tasks given durations by a cost model of a cluster, and
// replayed by the dispatcher's discrete-event simulator (dispatcher/simulator.hpp). The model
// and its limits: train/SIMULATION.md.
//
//   SimulateOptions s;
//   s.train.model = "convnet";
//   s.train.parallel = ParallelLayout::kData;
//   s.train.ranks = 4;                      // every rank in this one process
//   s.cluster = load_cluster("tools/sim/clusters/this_machine.pbtxt");
//   s.calibration = read_trace_times("convnet.trace.json");  // optional
//   SimulationReport r = simulate_training(s);  // r.step_seconds, r.images_per_second, ...
//
// Op times: a task's busy time is its op's time measured in a calibration trace (a `purine train
// --trace` file, matched by op name, then by the name without its "replica<r>::" scope, then by
// op type, shapes and device kind among the ops of the traced run's graph: the layout on one
// rank and location), or else the roofline: the op's declared cost (Operator::cost) against its
// device's peak FLOP/s and memory bandwidth plus a fixed overhead, scaled by how far the traced
// ops of its type (else of all types) were from their roofline.
// Transfers (copies between ranks or locations) and collectives take latency + bytes / bandwidth
// over the links of the cluster, each link carrying one transfer at a time.
// Functions without state; thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "purine.pb.h"
#include "train/options.hpp"
#include "train/trainer.hpp"

namespace purine {

// Reads a cluster file (protobuf text format, proto/purine.proto's ClusterProto). Throws
// purine::Error naming the file and the line and column of a syntax error or unknown field, or
// the field whose value is impossible (a node without cores, a speed that is not positive).
proto::ClusterProto load_cluster(const std::string& path);
// The same for text; `source` names it in errors.
proto::ClusterProto parse_cluster(const std::string& text, const std::string& source);
// The compute speed of one rank of `group` while `ranks` ranks of its node compute at once:
// NodeGroupProto.rank_speed interpolated linearly (1 at one rank and without entries; the last
// entry's speed beyond it).
double rank_speed_at(const proto::NodeGroupProto& group, int ranks);
// Replaces every node group's rank_speed with "RANKS:SPEED,..." (purine simulate --rank-speed,
// e.g. "2:0.94,4:0.96,8:0.82"); throws purine::Error naming the flag and the entry.
void set_rank_speeds(proto::ClusterProto& cluster, const std::string& text);
// Sets every node group's wake_cost_us and wake_latency_us from "COST:LATENCY" in microseconds
// (purine simulate --wake-us, e.g. "31.6:100", bench_dispatcher's hand-over line); throws
// purine::Error naming the flag.
void set_wake_costs(proto::ClusterProto& cluster, const std::string& text);
// Binds every rank of every node group to `cores` cores of its own (cores_per_rank; purine
// simulate --cores-per-rank, as mpirun binds ranks; 0: they share their node's cores); throws
// purine::Error naming the flag and a node group with fewer cores.
void set_cores_per_rank(proto::ClusterProto& cluster, int cores);
// One node with the cores of this machine and a modest CPU speed, for runs without --cluster.
proto::ClusterProto default_cluster();

// What a Chrome trace of a real run (dispatcher/tracer.hpp) says about its tasks: the median
// duration per task name over its runs, and the iterations' rhythm (a run is the i-th
// occurrence of every task name).
struct TraceTimes {
  std::string path;
  std::map<std::string, double> seconds;  // by task name, the median
  int iterations = 0;                     // occurrences of the most frequent name
  double step_seconds = 0;                // median start-to-start of consecutive runs
  double gap_seconds = 0;                 // median end of a run to start of the next
};
// Throws purine::Error naming the file, as `what`, when it cannot be read or is no trace.
TraceTimes read_trace_times(const std::string& path, const std::string& what = "--calibrate trace");

struct SimulateOptions {
  TrainOptions train;  // the layout; train.ranks ranks, all simulated (train.rank stays 0)
  proto::ClusterProto cluster = default_cluster();
  std::optional<TraceTimes> calibration;
  int iterations = 6;      // simulated runs; the step is measured over all but the first
  std::string trace_path;  // the simulated timeline as Chrome-trace JSON; empty: none
  // A non-blocking collective's transfer (--reduce=mpi) is work of its polling thread, sharing
  // the node's cores with the busy threads (dispatch::SimulationSetup::pool_time_slicing).
  bool time_slicing = true;
  // --ring-steps=auto: train.ring_steps chosen for the ranks' placement on the cluster, as
  // purine train chooses them for the machines of its MPI world (train/ring_steps.hpp).
  bool automatic_ring_steps = false;
  // Ranks dealt to the nodes in turn (mpirun --map-by node: rank r on node r mod nodes while
  // they have room); false: each node filled before the next (mpirun's default).
  bool ranks_by_node = false;
};

// A calibrated op: its measured time and what the roofline said.
struct OpError {
  std::string name;
  double measured = 0;  // seconds
  double modelled = 0;  // the scaled roofline, seconds
};

struct SimulationReport {
  int ranks = 1;
  int nodes = 1;  // nodes the ranks occupy
  int tasks = 0;  // per run, every rank's
  double step_seconds = 0;
  double images_per_second = 0;
  // The share of the step that communication adds: 1 - step without any transfer time / step.
  double exposed_communication = 0;
  double iteration_gap_seconds = 0;
  // Busy share of rank 0's busiest executor over the step.
  double busiest_executor_share = 0;
  std::string busiest_executor;
  RingSteps ring_steps = RingSteps::kDirect;  // what the ring reduction used
  std::string ring_steps_reason;              // with automatic_ring_steps: why
  // Busy share of the busiest link (channel) over the step, whichever rank's; none: empty.
  double busiest_link_share = 0;
  std::string busiest_link;
  // A pipeline (stages > 1): 1 - the busiest main thread's work per run / the run's span, as
  // purine train's PipelineMeter measures it (train/pipeline_meter.hpp); else 0.
  double pipeline_bubble = 0;
  std::vector<PipelineStage> pipeline_stages;  // the cut, as purine train makes it; else empty
  // How the tasks got their times.
  // by_type: the roofline scaled by the trace's measured/roofline ratio for that op type.
  int by_name = 0, by_shape = 0, by_type = 0, by_roofline = 0, views = 0;
  int transfers = 0;                    // sends, receives and copies: timed by the links
  double roofline_scale = 1;            // measured / roofline over the calibrated compute ops
  std::vector<OpError> op_errors;       // calibrated compute ops, the longest first
  double calibration_step_seconds = 0;  // the trace's own step (0 without one)
  // Tasks replayed from a device graph (train.cuda_graph, at ranks whose runs record one): they
  // pay their device time and the recording's launch, no launch each.
  int device_graph_tasks = 0;
  // The slowest compute speed of a node's ranks, relative to one rank alone
  // (NodeGroupProto.rank_speed at the ranks placed on it; 1 without a table).
  double rank_speed = 1;
};

// The cluster of `options` with the speeds (peak FLOP/s and memory bandwidth) of its devices of
// the layout's kind (GPUs with train.devices, else CPUs) scaled by one factor, found so that one
// rank of the layout simulates at `images_per_second` (e.g. a published 1-GPU figure), then
// stored in `*factor`. Throws purine::Error when no factor reaches it (the ops' fixed overheads
// alone take longer).
proto::ClusterProto fit_device_speed(const SimulateOptions& options, double images_per_second,
                                     double* factor);

// Builds the graph, simulates it and, with trace_path, writes the timeline. Throws
// purine::Error for options the trainer refuses, a layout the cluster cannot hold (more ranks
// than its nodes take, more GPUs than a node has), or an unreadable file.
SimulationReport simulate_training(const SimulateOptions& options);

}  // namespace purine
