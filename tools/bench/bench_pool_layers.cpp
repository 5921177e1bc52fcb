// bench_pool_layers: every distinct pooling op of a model's training graph (pool forward and
// pool_grad), timed alone on random data, in one process:
//
//   bench_pool_layers [--model=googlenet] [--batch=64] [--threads=2] [--reps=10] [--rounds=5]
//
// Prints per op the median milliseconds per call, the bytes it reads and writes, and the GB/s
// that makes, then the totals over the graph (an op counted as often as the graph has it). The
// inputs stay in cache between calls, unlike in training: compare two builds side by side, not
// these figures with a trace's.
#include <gflags/gflags.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/rng.hpp"
#include "base/tensor.hpp"
#include "operators/registry.hpp"
#include "tools/bench/model_ops.hpp"

DEFINE_string(model, "googlenet", "model whose pooling ops are timed");
DEFINE_string(data, "/usr/share/datasets/fashion-mnist", "IDX data directory (its image size)");
DEFINE_int32(batch, 64, "images per iteration");
DEFINE_int32(threads, 2, "OpenMP threads of the calling thread");
DEFINE_int32(reps, 10, "calls per timed round");
DEFINE_int32(rounds, 5, "timed rounds (the median is printed)");

namespace {

using purine::Shape;
using purine::Tensor;
using Clock = std::chrono::steady_clock;

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("a model's pooling ops timed alone");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  try {
    purine::require(FLAGS_reps >= 1 && FLAGS_rounds >= 1, "--reps and --rounds must be positive");
    const auto trainer =
        purine::bench::model_trainer(FLAGS_model, FLAGS_data, FLAGS_batch, FLAGS_threads);
    const std::vector<purine::bench::OpGeometry> layers = purine::bench::op_geometries(
        trainer->training_graph(),
        [](const std::string& type) { return type == "pool" || type == "pool_grad"; });
    omp_set_num_threads(FLAGS_threads);
    std::printf("%s, batch %d, %d threads, median of %d rounds x %d calls\n", FLAGS_model.c_str(),
                FLAGS_batch, FLAGS_threads, FLAGS_rounds, FLAGS_reps);
    std::printf("%-40s %-10s %4s %-20s %9s %9s %7s\n", "op", "type", "ops", "x shape", "ms",
                "MB moved", "GB/s");
    std::map<std::string, double> totals;  // by type, ms per iteration
    for (const purine::bench::OpGeometry& layer : layers) {
      purine::Rng rng(1);
      std::vector<Tensor> inputs;
      int64_t bytes = layer.out.count() * 4;
      for (const Shape& s : layer.in) {
        inputs.emplace_back(s);
        for (int64_t i = 0; i < s.count(); ++i)
          inputs.back().mutable_data()[i] = rng.uniform(-1.0f, 1.0f);
        bytes += s.count() * 4;
      }
      std::vector<const Tensor*> in;
      for (const Tensor& t : inputs) in.push_back(&t);
      Tensor output(layer.out);
      const auto op = purine::OperatorRegistry::create(layer.op->type(), layer.op->attrs());
      purine::OpContext context;
      std::vector<double> ms;
      for (int round = -1; round < FLAGS_rounds; ++round) {  // round -1 warms up
        const Clock::time_point start = Clock::now();
        for (int i = 0; i < FLAGS_reps; ++i) op->compute(in, {&output}, context);
        const double elapsed =
            std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        if (round >= 0) ms.push_back(elapsed / FLAGS_reps);
      }
      std::sort(ms.begin(), ms.end());
      const double median = ms[ms.size() / 2];
      totals[layer.op->type()] += median * layer.count;
      std::printf("%-40s %-10s %4d %-20s %9.3f %9.2f %7.1f\n",
                  purine::bench::short_op_name(layer.op->name(), FLAGS_model, 40).c_str(),
                  layer.op->type().c_str(), layer.count, purine::str(layer.in[0]).c_str(), median,
                  bytes / 1e6, bytes / median / 1e6);
    }
    for (const auto& [type, ms] : totals)
      std::printf("total %-10s %9.3f ms per iteration\n", type.c_str(), ms);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
