// Training throughput as a share of the machine's floating-point peak. First the peak: every
// thread runs fused multiply-adds on independent registers (AVX-512 where the CPU has it, else
// AVX2 with FMA) for a fixed time, and the FLOP/s of all threads together is the measured peak.
// Then, per model, the multiply-adds of one training iteration counted from its graph (the
// convolutions and inner products, forward and both gradients: 2 FLOPs each; the rest is
// memory-bound and left out), the images/s of a short training run, and so the FLOP/s reached
// and its share of the peak.
//   bench_peak_share [--models=convnet,googlenet] [--batch=64] [--iters=30] [--threads=2]
#include <gflags/gflags.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "purine/graph.hpp"
#include "train/options.hpp"
#include "train/trainer.hpp"

DEFINE_string(models, "convnet,googlenet", "models to train, comma-separated");
DEFINE_string(data, "/usr/share/datasets/fashion-mnist", "IDX data directory");
DEFINE_int32(batch, 64, "images per iteration");
DEFINE_int32(iters, 30, "iterations per model; the first 5 are not measured");
DEFINE_int32(threads, 2, "threads, for the peak and for training");

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kWarmup = 5;

// FLOPs of `rounds` x 8 independent FMA chains over `Width`-float registers.
__attribute__((target("avx512f"))) double fma_avx512(int64_t rounds) {
  __m512 a[8], b = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-3f);
  for (auto& x : a) x = _mm512_set1_ps(1.0f);
  for (int64_t r = 0; r < rounds; ++r)
    for (auto& x : a) x = _mm512_fmadd_ps(x, b, c);
  float sink[16];
  __m512 s = a[0];
  for (int i = 1; i < 8; ++i) s = _mm512_add_ps(s, a[i]);
  _mm512_storeu_ps(sink, s);
  return sink[0] > -1 ? 2.0 * 16 * 8 * static_cast<double>(rounds) : 0;
}

__attribute__((target("avx2,fma"))) double fma_avx2(int64_t rounds) {
  __m256 a[10], b = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-3f);
  for (auto& x : a) x = _mm256_set1_ps(1.0f);
  for (int64_t r = 0; r < rounds; ++r)
    for (auto& x : a) x = _mm256_fmadd_ps(x, b, c);
  float sink[8];
  __m256 s = a[0];
  for (int i = 1; i < 10; ++i) s = _mm256_add_ps(s, a[i]);
  _mm256_storeu_ps(sink, s);
  return sink[0] > -1 ? 2.0 * 8 * 10 * static_cast<double>(rounds) : 0;
}

// Every thread at once, in 12 trials of about 60 ms: the FLOP/s of all together in the fastest
// trial. On a shared virtual machine one long trial measured anywhere from 81 to 176 GFLOP/s on
// 2 threads (a vCPU stalled by its host counts as a slower core); the best of short ones is what
// the cores can do.
double measure_peak(int threads, const char** isa) {
  const bool avx512 = __builtin_cpu_supports("avx512f");
  *isa = avx512 ? "AVX-512" : "AVX2+FMA";
  constexpr int64_t kRounds = 1 << 23;
  constexpr int kTrials = 12;
  double best = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    std::vector<double> flops(threads);
    const Clock::time_point start = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { flops[t] = avx512 ? fma_avx512(kRounds) : fma_avx2(kRounds); });
    for (auto& th : pool) th.join();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    double total = 0;
    for (double f : flops) total += f;
    best = std::max(best, total / seconds);
  }
  return best;
}

// Multiply-adds x 2 of one run of `graph`'s convolutions and inner products, fused with their
// bias and ReLU (graphs/fusion.hpp) or not.
double training_flops(const purine::Graph& graph) {
  double flops = 0;
  for (const auto& op : graph.ops()) {
    const std::string type = op->type();
    const bool conv_forward = type == "conv" || type == "conv_bias_relu";
    const bool product_forward = type == "inner_product" || type == "inner_product_bias";
    if (conv_forward || type == "conv_grad_data" || type == "conv_grad_weight") {
      // y [N, O, Ho, Wo] (the forward's output, the gradients' first input), w [O, C, kh, kw].
      const purine::Shape& y = conv_forward ? op->outputs()[0]->shape() : op->inputs()[0]->shape();
      const purine::Shape& w = conv_forward
                                   ? op->inputs()[1]->shape()
                                   : op->inputs()[type == "conv_grad_data" ? 1 : 2]->shape();
      flops += 2.0 * y.count() * w.count_from(1);
    } else if (product_forward || type == "inner_product_grad_data" ||
               type == "inner_product_grad_weight") {
      // y [N, O] times K inputs each.
      const purine::Shape& y =
          product_forward ? op->outputs()[0]->shape() : op->inputs()[0]->shape();
      const purine::Shape& other = product_forward || type == "inner_product_grad_data"
                                       ? op->inputs()[1]->shape()
                                       : op->outputs()[0]->shape();
      flops += 2.0 * y.count() * other.count_from(1);
    }
  }
  return flops;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("training FLOP/s as a share of the measured FMA peak");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  try {
    const char* isa = "";
    const double peak = measure_peak(FLAGS_threads, &isa);
    std::printf("FMA peak: %.1f GFLOP/s (%s, %d threads)\n", peak / 1e9, isa, FLAGS_threads);
    std::printf("%-10s %6s %14s %10s %10s %8s\n", "model", "batch", "GFLOP/image", "img/s",
                "GFLOP/s", "of peak");
    for (const std::string& model : purine::parse_name_list(FLAGS_models, "--models")) {
      purine::TrainOptions o;
      o.model = model;
      o.data_dir = FLAGS_data;
      o.batch = FLAGS_batch;
      o.max_iters = FLAGS_iters;
      o.threads = FLAGS_threads;
      o.evaluate = false;
      o.lr = 0.001;
      purine::Trainer trainer(o);
      const double per_image = training_flops(trainer.training_graph()) / FLAGS_batch;
      Clock::time_point start;
      trainer.train([&](const purine::TrainProgress& p) {
        if (p.iteration == kWarmup) start = Clock::now();
      });
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      const double images = static_cast<double>(FLAGS_iters - kWarmup) * FLAGS_batch / seconds;
      std::printf("%-10s %6d %14.3f %10.0f %10.1f %7.1f%%\n", model.c_str(), FLAGS_batch,
                  per_image / 1e9, images, images * per_image / 1e9,
                  100.0 * images * per_image / peak);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
