// bench_conv_determinism: what the thread-count-independent weight gradient costs. Times
// conv_grad_weight on the 2-conv network's two layers (batch 64, 5x5, pad 2) with oneDNN, once
// as fixed batch chunks of one-thread primitives (deterministic=1, the default) and once as one
// primitive over all threads (deterministic=0), interleaved round by round in one process.
//
//   bench_conv_determinism [--threads=2] [--reps=50] [--rounds=5]
//
// Prints per layer the median milliseconds per call of each and their ratio (chunked / single).
#include <gflags/gflags.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "base/rng.hpp"
#include "base/tensor.hpp"
#include "operators/registry.hpp"

DEFINE_int32(threads, 2, "OpenMP threads of the calling thread");
DEFINE_int32(reps, 50, "calls per timed round");
DEFINE_int32(rounds, 5, "timed rounds per variant (the median is printed)");

namespace {

using purine::Tensor;

Tensor random_tensor(const purine::Shape& shape, purine::Rng& rng) {
  Tensor t(shape);
  for (int64_t i = 0; i < t.count(); ++i) t.mutable_data()[i] = rng.uniform(-1.0f, 1.0f);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  omp_set_num_threads(FLAGS_threads);
  struct Layer {
    const char* name;
    int64_t c, size, o;
  };
  std::printf("conv_grad_weight, oneDNN, batch 64, %d threads, median of %d rounds x %d calls\n",
              FLAGS_threads, FLAGS_rounds, FLAGS_reps);
  std::printf("%-6s %14s %14s %8s\n", "layer", "chunked ms", "single ms", "ratio");
  for (const Layer& layer : {Layer{"conv1", 1, 28, 32}, Layer{"conv2", 32, 14, 64}}) {
    purine::Rng rng(1);
    Tensor x = random_tensor({64, layer.c, layer.size, layer.size}, rng);
    Tensor w = random_tensor({layer.o, layer.c, 5, 5}, rng);
    Tensor dy = random_tensor({64, layer.o, layer.size, layer.size}, rng);
    Tensor dw(w.shape());
    std::vector<std::unique_ptr<purine::Operator>> ops;
    for (int64_t deterministic : {1, 0}) {
      ops.push_back(purine::OperatorRegistry::create("conv_grad_weight",
                                                     purine::Attrs()
                                                         .set("pad", 2)
                                                         .set("engine", "onednn")
                                                         .set("deterministic", deterministic)));
    }
    std::vector<std::vector<double>> ms(2);
    purine::OpContext context;
    for (int round = -1; round < FLAGS_rounds; ++round) {  // round -1 warms up
      for (size_t v = 0; v < ops.size(); ++v) {
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < FLAGS_reps; ++i) ops[v]->compute({&dy, &x, &w}, {&dw}, context);
        const double elapsed =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        if (round >= 0) ms[v].push_back(elapsed / FLAGS_reps);
      }
    }
    for (auto& m : ms) std::sort(m.begin(), m.end());
    const double chunked = ms[0][ms[0].size() / 2], single = ms[1][ms[1].size() / 2];
    std::printf("%-6s %14.3f %14.3f %7.2fx\n", layer.name, chunked, single, chunked / single);
  }
  return 0;
}
