// The bubble of a pipeline as it trains (train/pipeline_meter.hpp): the stages' work and the
// iteration's span from the dispatcher's task events, merged over ranks, and in the trainer.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "fashion_mnist.hpp"
#include "train/pipeline_meter.hpp"
#include "train/trainer.hpp"

using namespace purine;

TEST_CASE("pipeline times: bubble, balance, adding iterations and merging ranks",
          "[pipeline_meter]") {
  PipelineTimes a;
  a.busy = {3, 1};
  a.span = 4;
  a.in_flight = 2;
  CHECK(a.bubble() == 0.25);
  CHECK(a.balance() == Approx(1.0 / 3));
  PipelineTimes b = a;
  b.add(a);  // a second iteration of this process
  CHECK(b.busy == std::vector<double>{6, 2});
  CHECK(b.span == 8);
  CHECK(b.bubble() == 0.25);
  // Rank 0 saw stage 0, rank 1 stage 1 and a shorter span: the stages' work adds, the longest
  // span is the iteration's.
  PipelineTimes rank0, rank1;
  rank0.busy = {3, 0};
  rank0.span = 4;
  rank0.in_flight = 2;
  rank1.busy = {0, 2.5};
  rank1.span = 3.5;
  rank1.in_flight = 1;
  PipelineTimes merged = PipelineTimes::parse(rank0.serialize());
  merged.merge(PipelineTimes::parse(rank1.serialize()));
  CHECK(merged.busy == std::vector<double>{3, 2.5});
  CHECK(merged.span == 4);
  CHECK(merged.in_flight == 2);
  a.busy = {0.1, 1.0 / 3};
  a.span = 0.7;
  CHECK(PipelineTimes::parse(a.serialize()).busy == a.busy);  // exact, for any double
  CHECK(PipelineTimes{}.bubble() == 0);
  CHECK_THROWS_WITH(PipelineTimes::parse("1 2"), Catch::Contains("cannot parse '1 2'"));
}

TEST_CASE("the meter measures each stage's passes from the task events", "[pipeline_meter]") {
  const std::vector<Location> stages = {Location::cpu(0, 0), Location::cpu(0, 1)};
  Graph g;
  const Op* f[2][2];  // [stage][micro-batch]
  const Op* b[2][2];
  for (int m = 0; m < 2; ++m) {
    Graph::Scope scope(g, "micro" + std::to_string(m));
    for (int s = 0; s < 2; ++s) {
      Graph::Placement at(g, stages[s]);
      f[s][m] = g.add_op("f" + std::to_string(s), "relu");
      Graph::RoleScope backward(g, OpRole::kBackward);
      b[s][m] = g.add_op("b" + std::to_string(s), "relu");
    }
  }
  const Op* other_thread;
  {
    Graph::Placement at(g, stages[0], "data");
    other_thread = g.add_op("read", "relu");
  }
  PipelineMeter meter(g, stages, 2);
  const auto t0 = std::chrono::steady_clock::now();
  auto run = [&](const Op* op, double from_ms, double to_ms) {
    const auto at = [&](double ms) {
      return t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double, std::milli>(ms));
    };
    meter.on_task_start({&op->name(), nullptr, nullptr, 0, at(from_ms)});
    meter.on_task_end({&op->name(), nullptr, nullptr, 0, at(to_ms)});
  };
  // GPipe on two stages: stage 0 works 8 of the 10 ms, stage 1 5; both micro-batches are in
  // flight at stage 0 at once. A task of another thread counts for nothing.
  run(other_thread, 0, 20);
  run(f[0][0], 0, 2);
  run(f[0][1], 2, 4);
  run(f[1][0], 2, 3);
  run(f[1][1], 4, 5);
  run(b[1][0], 5, 6);
  run(b[0][0], 6, 8);
  run(b[1][1], 6, 8);
  run(b[0][1], 8, 10);
  const PipelineTimes times = meter.finish_iteration();
  REQUIRE(times.busy.size() == 2);
  CHECK(times.busy[0] == Approx(0.008));
  CHECK(times.busy[1] == Approx(0.005));
  CHECK(times.span == Approx(0.010));
  CHECK(times.bubble() == Approx(0.2));
  CHECK(times.in_flight == 2);
  CHECK(meter.finish_iteration().span == 0);  // the iteration was forgotten
}

TEST_CASE("training a pipeline reports its bubble, GPipe holds every micro-batch, 1F1B S",
          "[pipeline_meter][trainer][e2e]") {
  if (!testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  TrainOptions o;
  o.model = "mlp";
  o.data_dir = testing::kFashionMnistDir;
  o.max_iters = 6;
  o.batch = 32;
  o.threads = 2;
  o.evaluate = false;
  o.parallel = ParallelLayout::kPipeline;
  o.stages = 3;
  o.micro_batches = 4;
  for (auto [schedule, in_flight] :
       {std::pair{PipelineSchedule::kGPipe, 4}, std::pair{PipelineSchedule::k1F1B, 3}}) {
    o.schedule = schedule;
    const TrainResult result = Trainer(o).train();
    REQUIRE(result.pipeline);
    CHECK(result.pipeline->busy.size() == 3);
    for (double busy : result.pipeline->busy) CHECK(busy > 0);
    CHECK(result.pipeline->bubble() > 0);
    CHECK(result.pipeline->bubble() < 1);
    CHECK(result.pipeline->in_flight == in_flight);
  }
  o.parallel = ParallelLayout::kNone;
  o.stages = 1;
  CHECK(!Trainer(o).train().pipeline);
}
