// bench_pool_layers: every distinct pooling op of a model's training graph (pool forward and
// pool_grad), timed alone on random data, in one process:
//
//   bench_pool_layers [--model=googlenet] [--batch=64] [--threads=2] [--reps=10] [--rounds=5]
//                     [--blocks]
//
// Prints per op the median milliseconds per call, the bytes it reads and writes, and the GB/s
// that makes, then the totals over the graph (an op counted as often as the graph has it).
// --blocks times each op a second time with its tensors in the channel blocks of oneDNN's
// convolutions (graphs/channel_blocks.hpp), where the op takes them, and prints both. The
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
#include "operators/conv.hpp"
#include "operators/registry.hpp"
#include "tools/bench/model_ops.hpp"

DEFINE_string(model, "googlenet", "model whose pooling ops are timed");
DEFINE_string(data, "/usr/share/datasets/fashion-mnist", "IDX data directory (its image size)");
DEFINE_int32(batch, 64, "images per iteration");
DEFINE_int32(threads, 2, "OpenMP threads of the calling thread");
DEFINE_int32(reps, 10, "calls per timed round");
DEFINE_int32(rounds, 5, "timed rounds (the median is printed)");
DEFINE_bool(blocks, false, "also time each op in channel blocks (conv_channel_block())");

namespace {

using purine::Shape;
using purine::Tensor;
using Clock = std::chrono::steady_clock;

bool listed(const std::vector<int>& list, size_t i) {
  return std::find(list.begin(), list.end(), static_cast<int>(i)) != list.end();
}

// The median milliseconds per call of `layer`'s op on random tensors, in channel blocks of
// `block` where the op takes them (0: plain).
double time_op(const purine::bench::OpGeometry& layer, int block) {
  const auto op = purine::OperatorRegistry::create(layer.op->type(), layer.op->attrs());
  const purine::ChannelBlocking blocking =
      block > 0 ? op->channel_blocking(layer.in, block) : purine::ChannelBlocking{};
  purine::Rng rng(1);
  std::vector<Tensor> inputs;
  for (size_t k = 0; k < layer.in.size(); ++k) {
    inputs.emplace_back(layer.in[k]);
    if (listed(blocking.inputs, k)) inputs.back().set_channel_block(block);
    float* data = inputs.back().mutable_data();
    for (int64_t i = 0; i < layer.in[k].count(); ++i) data[i] = rng.uniform(-1.0f, 1.0f);
  }
  std::vector<const Tensor*> in;
  for (const Tensor& t : inputs) in.push_back(&t);
  Tensor output(layer.out);
  if (listed(blocking.outputs, 0)) output.set_channel_block(block);
  purine::OpContext context;
  std::vector<double> ms;
  for (int round = -1; round < FLAGS_rounds; ++round) {  // round -1 warms up
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < FLAGS_reps; ++i) op->compute(in, {&output}, context);
    const double elapsed = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (round >= 0) ms.push_back(elapsed / FLAGS_reps);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

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
    const int block = FLAGS_blocks ? purine::conv_channel_block() : 0;
    std::printf("%-40s %-10s %4s %-20s %9s %9s %7s", "op", "type", "ops", "x shape", "ms",
                "MB moved", "GB/s");
    if (block > 0) std::printf(" %9s", ("ms in " + std::to_string(block) + "s").c_str());
    std::printf("\n");
    std::map<std::string, double> totals, block_totals;  // by type, ms per iteration
    for (const purine::bench::OpGeometry& layer : layers) {
      int64_t bytes = layer.out.count() * 4;
      for (const Shape& s : layer.in) bytes += s.count() * 4;
      const double median = time_op(layer, 0);
      totals[layer.op->type()] += median * layer.count;
      std::printf("%-40s %-10s %4d %-20s %9.3f %9.2f %7.1f",
                  purine::bench::short_op_name(layer.op->name(), FLAGS_model, 40).c_str(),
                  layer.op->type().c_str(), layer.count, purine::str(layer.in[0]).c_str(), median,
                  bytes / 1e6, bytes / median / 1e6);
      if (block > 0) {
        const double blocked = time_op(layer, block);
        block_totals[layer.op->type()] += blocked * layer.count;
        std::printf(" %9.3f", blocked);
      }
      std::printf("\n");
    }
    for (const auto& [type, ms] : totals) {
      std::printf("total %-10s %9.3f ms per iteration", type.c_str(), ms);
      if (block > 0) std::printf(", %.3f in blocks", block_totals[type]);
      std::printf("\n");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
