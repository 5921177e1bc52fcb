#include "tools/cli/simulate_command.hpp"

#include <gflags/gflags.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "tools/cli/train_command.hpp"
#include "train/simulation.hpp"

DECLARE_string(trace);  // train_command.cpp: here, the simulated timeline

DEFINE_int32(ranks, 1, "simulate: the ranks (processes) of the layout, all simulated here");
DEFINE_string(cluster, "",
              "simulate: the cluster file (protobuf text, tools/sim/clusters/); default: one "
              "node with this machine's cores at default speeds");
DEFINE_string(calibrate, "",
              "simulate: a Chrome trace of a real run (purine train --trace) to take op times "
              "from");
DEFINE_string(scaling, "", "simulate: rank counts to tabulate, e.g. 1,2,4,8");
DEFINE_int32(sim_iterations, 6, "simulate: runs of the graph simulated (at least 2)");
DEFINE_string(plot, "",
              "simulate: with --scaling, draw img/s over the rank counts (and linear scaling from "
              "the first) as an SVG file");
DEFINE_bool(time_slicing, true,
            "simulate: a non-blocking collective's transfer (--reduce=mpi) is work of its "
            "polling thread and shares the node's cores with the busy threads; "
            "--notime-slicing: it takes no core");
DEFINE_double(fit_images_per_second, 0,
              "simulate: first scale the cluster's device speeds (its GPUs' with --devices, else "
              "its CPUs') so that one rank simulates at this many img/s (a measured or published "
              "1-device figure), then predict; 0: the speeds as the cluster file gives them");

DEFINE_string(map_by, "slot",
              "simulate: how ranks are placed on the cluster's nodes, as mpirun's --map-by: slot "
              "(each node filled before the next, mpirun's default) or node (one rank on each "
              "node in turn)");
DEFINE_string(rank_speed, "",
              "simulate: RANKS:SPEED,... (e.g. 2:0.94,8:0.82): a rank's compute speed while so "
              "many ranks of its node compute at once, relative to one alone, for every node of "
              "the cluster (its rank_speed; tools/bench/weak_scaling.sh's ceiling measures it); "
              "empty: the cluster file's");

DEFINE_int32(cores_per_rank, -1,
             "simulate: bind every rank to this many cores of its own, for every node of the "
             "cluster (its cores_per_rank), as mpirun binds each of up to 2 ranks to a core (then "
             "a rank's data and comm threads share its compute thread's core); 0: every rank's "
             "threads share the node's cores; -1: the cluster file's");

DEFINE_string(wake_us, "",
              "simulate: COST:LATENCY in microseconds (e.g. 31.6:100) for every node of the "
              "cluster: what waking a sleeping dispatcher thread costs the thread that hands it a "
              "task, and how much later that task starts (build/tools/bench_dispatcher's "
              "hand-over line measures both); empty: the cluster file's");

namespace purine::cli {
namespace {

std::vector<int> parse_counts(const std::string& text) {
  std::vector<int> counts;
  for (double v : parse_number_list(text, "--scaling")) {
    require(v >= 1 && v == static_cast<int>(v) && v <= 100000,
            "--scaling: rank counts are whole numbers from 1, got ", v);
    counts.push_back(static_cast<int>(v));
  }
  return counts;
}

double ms(double seconds) { return seconds * 1e3; }

// img/s over rank counts as an SVG line chart, with linear scaling from the first count dashed.
void write_plot(const std::string& path, const std::string& title,
                const std::vector<std::pair<int, double>>& points) {
  const double w = 640, h = 400, left = 70, right = 20, top = 40, bottom = 50;
  const int max_ranks = points.back().first;
  const double ideal = points.front().second / points.front().first;
  double max_rate = ideal * max_ranks;
  for (const auto& p : points) max_rate = std::max(max_rate, p.second);
  auto x = [&](double ranks) { return left + (w - left - right) * ranks / max_ranks; };
  auto y = [&](double rate) { return h - bottom - (h - top - bottom) * rate / max_rate; };
  std::ofstream out(path);
  require(out.good(), "--plot: cannot write '", path, "'");
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << left << "\" y=\"24\" font-size=\"14\">" << title << "</text>\n"
      << "<line x1=\"" << left << "\" y1=\"" << y(0) << "\" x2=\"" << x(max_ranks) << "\" y2=\""
      << y(0) << "\" stroke=\"black\"/>\n<line x1=\"" << left << "\" y1=\"" << y(0) << "\" x2=\""
      << left << "\" y2=\"" << top << "\" stroke=\"black\"/>\n"
      << "<text x=\"" << (w / 2) << "\" y=\"" << (h - 12) << "\">ranks</text>\n"
      << "<text x=\"12\" y=\"" << top - 8 << "\">img/s</text>\n"
      << "<text x=\"" << left - 8 << "\" y=\"" << top + 4 << "\" text-anchor=\"end\">"
      << static_cast<long>(max_rate) << "</text>\n"
      << "<line x1=\"" << x(0) << "\" y1=\"" << y(0) << "\" x2=\"" << x(max_ranks) << "\" y2=\""
      << y(ideal * max_ranks) << "\" stroke=\"gray\" stroke-dasharray=\"5,4\"/>\n"
      << "<polyline fill=\"none\" stroke=\"steelblue\" stroke-width=\"2\" points=\"";
  for (const auto& p : points) out << x(p.first) << "," << y(p.second) << " ";
  out << "\"/>\n";
  for (const auto& p : points)
    out << "<circle cx=\"" << x(p.first) << "\" cy=\"" << y(p.second)
        << "\" r=\"3\" fill=\"steelblue\"/>\n<text x=\"" << x(p.first) << "\" y=\"" << y(0) + 16
        << "\" text-anchor=\"middle\">" << p.first << "</text>\n";
  out << "</svg>\n";
  out.close();
  require(!out.fail(), "--plot: cannot write '", path, "'");
}

void print_report(const SimulateOptions& s, const SimulationReport& r) {
  const TrainOptions& o = s.train;
  std::printf(
      "simulated %s, --parallel=%s over %d rank%s (%d node%s of '%s'), --reduce=%s, "
      "batch %d%s\n",
      o.model.c_str(), name_of(o.parallel), r.ranks, r.ranks == 1 ? "" : "s", r.nodes,
      r.nodes == 1 ? "" : "s", s.cluster.name().c_str(), name_of(o.reduce), o.batch,
      o.parallel == ParallelLayout::kData || o.parallel == ParallelLayout::kHybrid ? " per rank"
                                                                                   : "");
  const bool ring = r.ranks > 1 && o.reduce == Reduction::kRing &&
                    (o.parallel == ParallelLayout::kData || o.parallel == ParallelLayout::kHybrid);
  if (ring && !r.ring_steps_reason.empty())
    std::printf("  ring reduction with --ring-steps=%s (auto: %s)\n", name_of(r.ring_steps),
                r.ring_steps_reason.c_str());
  else if (ring)
    std::printf("  ring reduction with --ring-steps=%s\n", name_of(r.ring_steps));
  std::printf("  step %.3f ms, %.1f img/s, exposed communication %.1f%% of the step\n",
              ms(r.step_seconds), r.images_per_second, 100 * r.exposed_communication);
  std::printf(
      "  %d tasks per step: %d timed by name in the trace, %d by op type and shape, %d by "
      "the roofline scaled per op type, %d by the roofline (x%.3g), %d views, %d transfers by "
      "the links; %.3f ms between runs\n",
      r.tasks, r.by_name, r.by_shape, r.by_type, r.by_roofline, r.roofline_scale, r.views,
      r.transfers, ms(r.iteration_gap_seconds));
  if (r.rank_speed != 1)
    std::printf(
        "  CPU ops %.1f%% slower than one rank alone: the ranks of a node share its memory "
        "(rank speed %.3f)\n",
        100 * (1 / r.rank_speed - 1), r.rank_speed);
  if (r.device_graph_tasks > 0)
    std::printf(
        "  CUDA graphs (--cuda-graph): %d tasks replayed from recordings, one launch per run "
        "(--nocuda-graph: a launch per op)\n",
        r.device_graph_tasks);
  if (o.stages > 1) {
    std::printf("  pipeline of %s, %d micro-batches (%s): bubble %.3f\n", pipeline_shape(o).c_str(),
                o.micro_batches, name_of(o.schedule), r.pipeline_bubble);
    std::printf("  %s", stages_line(r.pipeline_stages).c_str());
  }
  std::printf("  busiest executor of rank 0: %s, %.0f%% busy\n", r.busiest_executor.c_str(),
              100 * r.busiest_executor_share);
  if (!r.busiest_link.empty())
    std::printf("  busiest link: %s, %.0f%% busy\n", r.busiest_link.c_str(),
                100 * r.busiest_link_share);
  if (s.calibration) {
    std::printf("  calibration %s: %d runs, step %.3f ms\n", s.calibration->path.c_str(),
                s.calibration->iterations, ms(r.calibration_step_seconds));
    if (!r.op_errors.empty()) {
      double weighted = 0, total = 0;
      for (const OpError& e : r.op_errors) {
        weighted += std::abs(e.modelled - e.measured);
        total += e.measured;
      }
      std::printf(
          "  roofline against the trace, per op of the traced run (longest first; the "
          "simulation uses the measured times): time-weighted error %.0f%%\n",
          total > 0 ? 100 * weighted / total : 0.0);
      std::printf("    %-48s %12s %12s %8s\n", "op", "measured ms", "roofline ms", "error");
      for (size_t i = 0; i < r.op_errors.size() && i < 10; ++i) {
        const OpError& e = r.op_errors[i];
        std::printf("    %-48s %12.3f %12.3f %+7.0f%%\n", e.name.substr(0, 48).c_str(),
                    ms(e.measured), ms(e.modelled), 100 * (e.modelled - e.measured) / e.measured);
      }
    }
  }
}

}  // namespace

std::vector<FlagHelp> simulate_flags() {
  return {
      {"ranks", ""},
      {"cluster", ""},
      {"calibrate", ""},
      {"scaling", ""},
      {"sim_iterations", ""},
      {"fit_images_per_second", ""},
      {"time_slicing", ""},
      {"rank_speed", ""},
      {"wake_us", ""},
      {"cores_per_rank", ""},
      {"map_by", ""},
      {"plot", ""},
      {"trace",
       "write the simulated timeline of every rank as Chrome-trace JSON to this file "
       "(the format of purine train --trace: open both in ui.perfetto.dev)"},
      {"model", "the model whose training is simulated (purine models lists them)"},
      {"data", "the data set or synthetic:CxHxW:CLASSES: its image size shapes the graph"},
      {"batch", ""},
      {"parallel", ""},
      {"reduce", ""},
      {"bucket_kb", ""},
      {"ring_steps", ""},
      {"threads",
       "compute threads per rank (the calibration trace's run should use the same); 0 "
       "(the default): one per physical core of this machine, as purine train takes"},
      {"locations", ""},
      {"devices", ""},
      {"device", ""},
      {"stages", ""},
      {"virtual_stages", ""},
      {"split", ""},
      {"micro_batches", ""},
      {"schedule", ""},
      {"stage_cut", ""},
      {"stage_trace", ""},
      {"optimizer", ""},
      {"clip_norm", ""},
      {"sync_bn", ""},
      {"prefetch", ""},
      {"reuse_memory",
       "as purine train: with the memory plan's order edges between ops whose blobs share "
       "memory (--noreuse-memory: without)"},
      {"cuda_graph",
       "at a GPU, as purine train: a rank whose runs record a CUDA graph pays one launch "
       "(the cluster's gpu.graph_launch_us) per run and no op_overhead_us per GPU op; "
       "--nocuda-graph: every op pays its launch"},
      {"classes", ""},
  };
}

int run_simulate() {
  SimulateOptions s;
  s.train = options_from_flags(FLAGS_ranks);
  require(FLAGS_ranks >= 1, "--ranks must be at least 1, got ", FLAGS_ranks);
  if (!FLAGS_cluster.empty()) s.cluster = load_cluster(FLAGS_cluster);
  if (!FLAGS_rank_speed.empty()) set_rank_speeds(s.cluster, FLAGS_rank_speed);
  if (!FLAGS_wake_us.empty()) set_wake_costs(s.cluster, FLAGS_wake_us);
  require(FLAGS_cores_per_rank >= -1,
          "--cores-per-rank must be -1 (the cluster file's) or at least 0, got ",
          FLAGS_cores_per_rank);
  if (FLAGS_cores_per_rank >= 0) set_cores_per_rank(s.cluster, FLAGS_cores_per_rank);
  if (!FLAGS_calibrate.empty()) s.calibration = read_trace_times(FLAGS_calibrate);
  require(FLAGS_sim_iterations >= 2, "--sim-iterations must be at least 2, got ",
          FLAGS_sim_iterations);
  s.iterations = FLAGS_sim_iterations;
  s.time_slicing = FLAGS_time_slicing;
  s.automatic_ring_steps = ring_steps_automatic();
  require(FLAGS_map_by == "slot" || FLAGS_map_by == "node", "--map-by must be slot or node, got '",
          FLAGS_map_by, "'");
  s.ranks_by_node = FLAGS_map_by == "node";
  const std::vector<int> counts = parse_counts(FLAGS_scaling);
  require(FLAGS_plot.empty() || !counts.empty(), "--plot draws the --scaling table: give both");
  if (!counts.empty())
    require(std::is_sorted(counts.begin(), counts.end()),
            "--scaling: give the rank counts in increasing order");
  s.trace_path = FLAGS_trace;
  if (FLAGS_fit_images_per_second != 0) {
    double factor = 1;
    s.cluster = fit_device_speed(s, FLAGS_fit_images_per_second, &factor);
    std::printf("fitted: the cluster's %s speeds x%.4g give one rank %.1f img/s\n",
                s.train.devices.empty() ? "CPU" : "GPU", factor, FLAGS_fit_images_per_second);
  }
  const SimulationReport report = simulate_training(s);
  print_report(s, report);
  if (!s.trace_path.empty())
    std::printf("  wrote the simulated timeline to %s\n", s.trace_path.c_str());
  if (counts.empty()) return 0;
  std::printf("\n%6s %6s %10s %10s %8s %10s %12s\n", "ranks", "nodes", "step ms", "img/s",
              "speedup", "efficiency", "exposed comm");
  double base = 0;
  int base_ranks = 0;
  std::vector<std::pair<int, double>> points;
  for (int n : counts) {
    SimulateOptions at = s;
    at.trace_path.clear();
    at.train = options_from_flags(n);
    const SimulationReport r = simulate_training(at);
    if (base == 0) {
      base = r.images_per_second;
      base_ranks = n;
    }
    const double speedup = r.images_per_second / base;
    std::printf("%6d %6d %10.3f %10.1f %7.2fx %9.0f%% %11.1f%%\n", n, r.nodes, ms(r.step_seconds),
                r.images_per_second, speedup, 100 * speedup * base_ranks / n,
                100 * r.exposed_communication);
    points.emplace_back(n, r.images_per_second);
  }
  if (!FLAGS_plot.empty()) {
    write_plot(FLAGS_plot,
               str(s.train.model, ", --parallel=", name_of(s.train.parallel), ", --reduce=",
                   name_of(s.train.reduce), ", on '", s.cluster.name(), "' (dashed: linear)"),
               points);
    std::printf("wrote the plot to %s\n", FLAGS_plot.c_str());
  }
  return 0;
}

}  // namespace purine::cli
