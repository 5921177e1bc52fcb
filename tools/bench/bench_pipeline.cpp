// Pipeline bubble and throughput: a model cut into --stages stages (graphs/pipeline.hpp) trained
// with M micro-batches per iteration under the GPipe, 1F1B and ZB-H1 schedules, and under 1F1B
// and ZB-H1 with each location holding 2 stages (interleaved, "1f1bx2", "zbh1x2"). From the
// tasks the dispatcher ran (train/pipeline_meter.hpp), over the measured iterations: the bubble,
// the share of the iterations during which the busiest stage's main thread was idle (1 - its busy
// time / the spans from each iteration's first stage task start to its last end; with stages of
// unequal work the others idle longer), next to the theory for equal stages (bubble_theory():
// (S-1)/(M+S-1); ZB-H1 with equal forward, backward and weight-gradient times: (S-1)/(3M+S-1);
// interleaved: (S-1)/(2M+S-1); interleaved ZB-H1: its generated run's,
// graphs/zero_bubble_interleaved.hpp);
// the stages' balance (least busy / most busy); the most micro-batches in flight at one stage
// (forward started, backward not finished: the activations a stage must hold); images per
// second against the same model at one location in the same run (with the same threads: a
// pipeline on one machine gains nothing from more locations, it shows the schedule's cost);
// the memory the training graph allocated (MB). A second table shows the memory of a model whose
// activations dominate at each stage as the micro-batches grow, per schedule (the memory plan:
// purine/compile.hpp). The default model, "pipeline_mlp" (registered here), has two stages of equal
// work, as the theory assumes: 784-1024-1024 | 1792-10 fully connected, 1.85 M multiply-adds per
// image each side of the cut.
//   bench_pipeline [--model=pipeline_mlp] [--stages=2] [--batch=512] [--iters=40] [--threads=2]
//                  [--memory_model=lenet] [--memory_micro_batch=32]
#include <gflags/gflags.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "graphs/layers.hpp"
#include "graphs/pipeline.hpp"
#include "models/models.hpp"
#include "purine/dsl.hpp"
#include "purine/graph.hpp"
#include "train/trainer.hpp"

DEFINE_string(model, "pipeline_mlp", "model to train");
DEFINE_string(data, "/usr/share/datasets/fashion-mnist", "IDX data directory");
DEFINE_int32(stages, 2, "pipeline stages (CPU locations of this process)");
DEFINE_int32(batch, 512, "images per iteration (divisible by 8)");
DEFINE_int32(iters, 40,
             "iterations per configuration; the first min(10, iters / 2) are not measured");
DEFINE_int32(threads, 2, "compute threads, shared by the stages");
DEFINE_string(memory_model, "lenet", "model of the memory table (activations should dominate)");
DEFINE_int32(memory_micro_batch, 32, "images per micro-batch in the memory table");

namespace {

using purine::Location;

purine::Blob* pipeline_mlp(purine::Graph& g, purine::Blob* images, const purine::ModelSpec& spec) {
  using purine::InnerProductLayer;
  auto fc = [&](const std::string& name, int64_t outputs) -> purine::Composite& {
    return g.add<InnerProductLayer>(name, InnerProductLayer::Options{outputs});
  };
  auto relu = [&](const std::string& name) -> purine::Composite& {
    return g.add<purine::ActivationLayer>(name, "relu");
  };
  purine::Graph::Scope scope(g, "pipeline_mlp");
  return (purine::B{images} >> fc("fc1", 1024) >> relu("relu1") >> fc("fc2", 1024) >>
          relu("relu2") >> fc("fc3", 1792) >> relu("relu3") >> fc("fc4", spec.classes))
      .top(0);
}
PURINE_REGISTER_MODEL("pipeline_mlp", pipeline_mlp);

struct Result {
  double bubble = 0;
  double balance = 0;
  int in_flight = 0;  // the most micro-batches at one stage
  double images_per_sec = 0;
  double megabytes = 0;  // allocated by the training graph's compile, all stages
};

double megabytes(const purine::MemoryUse& use) { return use.allocated_bytes / 1e6; }

// Trains one configuration: the trainer measures the bubble (train/pipeline_meter.hpp) and the
// throughput after its first min(10, iterations / 2) iterations.
Result measure(purine::ParallelLayout layout, int micro_batches, purine::PipelineSchedule schedule,
               int virtual_stages = 1) {
  purine::TrainOptions o;
  o.model = FLAGS_model;
  o.data_dir = FLAGS_data;
  o.batch = FLAGS_batch;
  o.max_iters = FLAGS_iters;
  o.threads = FLAGS_threads;
  o.evaluate = false;
  o.lr = 0.001;
  o.parallel = layout;
  if (layout == purine::ParallelLayout::kPipeline) o.stages = FLAGS_stages;
  o.micro_batches = micro_batches;
  o.schedule = schedule;
  o.virtual_stages = virtual_stages;
  purine::Trainer trainer(o);
  Result result;
  for (const auto& [location, use] : trainer.memory().by_location)
    result.megabytes += megabytes(use);
  const purine::TrainResult trained = trainer.train();
  if (trained.pipeline) {
    result.bubble = trained.pipeline->bubble();
    result.balance = trained.pipeline->balance();
    result.in_flight = trained.pipeline->in_flight;
  }
  result.images_per_sec = trained.images_per_sec;
  return result;
}

// The memory of --memory_model at each stage as the micro-batches grow (each of
// --memory_micro_batch images): what the training graph's compile allocated, per schedule and
// without sharing. Only built, not trained: the plan is known before the first run.
void print_memory_table() {
  const int s = FLAGS_stages;
  std::printf("\nmemory of %s, micro-batches of %d images: MB allocated at stage 0 .. %d\n",
              FLAGS_memory_model.c_str(), FLAGS_memory_micro_batch, s - 1);
  std::printf("%3s", "M");
  for (const char* column : {"gpipe", "1f1b", "zbh1", "unshared"})
    std::printf(" %*s", 8 * s, column);
  std::printf(" %10s\n", "1f1b/gpipe");
  for (int m : {1, 2, 4, 8, 16}) {
    std::printf("%3d", m);
    std::vector<double> first_stage;
    for (int column = 0; column < 4; ++column) {
      purine::TrainOptions o;
      o.model = FLAGS_memory_model;
      o.data_dir = FLAGS_data;
      o.batch = FLAGS_memory_micro_batch * m;
      o.threads = FLAGS_threads;
      o.evaluate = false;
      o.parallel = purine::ParallelLayout::kPipeline;
      o.stages = s;
      o.micro_batches = m;
      const purine::PipelineSchedule schedules[] = {
          purine::PipelineSchedule::kGPipe, purine::PipelineSchedule::k1F1B,
          purine::PipelineSchedule::kZBH1, purine::PipelineSchedule::k1F1B};
      o.schedule = schedules[column];
      o.reuse_memory = column < 3;
      purine::Trainer trainer(o);
      for (int stage = 0; stage < s; ++stage) {
        const double mb = megabytes(trainer.memory().by_location.at(Location::cpu(0, stage)));
        if (stage == 0) first_stage.push_back(mb);
        std::printf(" %7.1f", mb);
      }
    }
    std::printf(" %10.2f\n", first_stage[1] / first_stage[0]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("pipeline bubble and throughput per schedule and micro-batch count");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_iters < 4) {
    std::fprintf(stderr, "error: --iters must be at least 4, got %d\n", FLAGS_iters);
    return 1;
  }
  try {
    const int s = FLAGS_stages;
    std::printf(
        "pipeline of %s: %d stages at rank0:cpu0..%d, batch %d, %d threads, %d "
        "iterations (first %d not measured)\n",
        FLAGS_model.c_str(), s, s - 1, FLAGS_batch, FLAGS_threads, FLAGS_iters,
        std::min(10, FLAGS_iters / 2));
    const Result single =
        measure(purine::ParallelLayout::kNone, 1, purine::PipelineSchedule::k1F1B);
    std::printf("one location: %.0f img/s\n\n", single.images_per_sec);
    std::printf("%-8s %3s %8s %8s %8s %10s %9s %8s %8s\n", "schedule", "M", "theory", "bubble",
                "balance", "in flight", "img/s", "vs one", "MB");
    auto row = [&](purine::PipelineSchedule schedule, int m, int virtual_stages) {
      const Result r = measure(purine::ParallelLayout::kPipeline, m, schedule, virtual_stages);
      const std::string name = purine::name_of(schedule) +
                               (virtual_stages > 1 ? "x" + std::to_string(virtual_stages) : "");
      std::printf("%-8s %3d %8.3f %8.3f %8.2f %10d %9.0f %8.2f %8.1f\n", name.c_str(), m,
                  purine::bubble_theory(schedule, s, m, virtual_stages), r.bubble, r.balance,
                  r.in_flight, r.images_per_sec, r.images_per_sec / single.images_per_sec,
                  r.megabytes);
    };
    for (auto schedule : {purine::PipelineSchedule::kGPipe, purine::PipelineSchedule::k1F1B,
                          purine::PipelineSchedule::kZBH1})
      for (int m : {1, 2, 4, 8})
        if (schedule != purine::PipelineSchedule::kZBH1 || m > 1) row(schedule, m, 1);  // 1F1B
    // Interleaved (--virtual-stages=2: each location two stages), where the model has the
    // layers and the micro-batches go round the locations evenly.
    for (int m : {2, 4, 8})
      if (m % s == 0) row(purine::PipelineSchedule::k1F1B, m, 2);
    for (int m : {2, 4, 8}) row(purine::PipelineSchedule::kZBH1, m, 2);  // any m
    print_memory_table();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
