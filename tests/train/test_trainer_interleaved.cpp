// Interleaved stages (--virtual-stages, graphs/pipeline.hpp): the schedules' orders by hand, each
// location running its chunks' passes in that order, and the training unchanged by it.
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "base/device_runtime.hpp"
#include "dispatcher/emulated_devices.hpp"
#include "graphs/pipeline.hpp"
#include "graphs/zero_bubble_interleaved.hpp"
#include "pass_recorder.hpp"
#include "purine/graph.hpp"
#include "train/trainer.hpp"

using namespace purine;
using testing::PassRecorder;

TEST_CASE(
    "interleaved schedules: micro-batches in rounds of the locations, through the chunks in "
    "turn, backwards through them in reverse",
    "[pipeline]") {
  using P = std::vector<PipelineStep>;
  const Pass F = Pass::kForward, B = Pass::kBackward;
  // 2 locations, 2 chunks each (stages 0 and 2 at location 0, 1 and 3 at location 1), 4
  // micro-batches. Forward step k: micro-batch k / 4 * 2 + k % 2 through chunk k / 2 % 2.
  // Location 0 warms up with (2-1)*2 + 2*(2-1-0) = 4 forwards, location 1 with 2.
  CHECK(schedule_order(PipelineSchedule::k1F1B, 0, 2, 4, 2) == P{{F, 0, 0},
                                                                 {F, 1, 0},
                                                                 {F, 0, 1},
                                                                 {F, 1, 1},
                                                                 {F, 2, 0},
                                                                 {B, 0, 1},
                                                                 {F, 3, 0},
                                                                 {B, 1, 1},
                                                                 {F, 2, 1},
                                                                 {B, 0, 0},
                                                                 {F, 3, 1},
                                                                 {B, 1, 0},
                                                                 {B, 2, 1},
                                                                 {B, 3, 1},
                                                                 {B, 2, 0},
                                                                 {B, 3, 0}});
  // The last stage (chunk 1 of location 1) runs each backward right after its forward.
  CHECK(schedule_order(PipelineSchedule::k1F1B, 1, 2, 4, 2) == P{{F, 0, 0},
                                                                 {F, 1, 0},
                                                                 {F, 0, 1},
                                                                 {B, 0, 1},
                                                                 {F, 1, 1},
                                                                 {B, 1, 1},
                                                                 {F, 2, 0},
                                                                 {B, 0, 0},
                                                                 {F, 3, 0},
                                                                 {B, 1, 0},
                                                                 {F, 2, 1},
                                                                 {B, 2, 1},
                                                                 {F, 3, 1},
                                                                 {B, 3, 1},
                                                                 {B, 2, 0},
                                                                 {B, 3, 0}});
  CHECK(schedule_order(PipelineSchedule::kGPipe, 1, 2, 2, 2) ==
        P{{F, 0, 0}, {F, 1, 0}, {F, 0, 1}, {F, 1, 1}, {B, 0, 1}, {B, 1, 1}, {B, 0, 0}, {B, 1, 0}});
  // One chunk is the plain schedule.
  CHECK(schedule_order(PipelineSchedule::k1F1B, 0, 3, 6, 1) ==
        schedule_order(PipelineSchedule::k1F1B, 0, 3, 6));
  // The bubble shrinks by the chunks: (S-1)/(V*M+S-1).
  CHECK(bubble_theory(PipelineSchedule::k1F1B, 2, 4, 2) == Approx(1.0 / 9));
  CHECK(bubble_theory(PipelineSchedule::k1F1B, 2, 4) == Approx(1.0 / 5));
  CHECK_THROWS_WITH(schedule_order(PipelineSchedule::k1F1B, 0, 2, 3, 2),
                    Catch::Contains("3 micro-batches are no multiple of 2"));
  // ZB-H1 interleaved: the generated zero-bubble orders (graphs/zero_bubble_interleaved.hpp).
  CHECK(schedule_order(PipelineSchedule::kZBH1, 1, 2, 3, 2) ==
        zero_bubble_interleaved(2, 3, 2).orders[1]);
}

namespace {

// convnet_bn, the default model, at 2 locations holding 2 stages each, on synthetic data.
TrainOptions interleaved_run(PipelineSchedule schedule) {
  TrainOptions o;
  o.model = "convnet_bn";
  o.data_dir = "synthetic:1x28x28:10";
  o.batch = 16;
  o.max_iters = 3;
  o.lr = 0.05;
  o.threads = 2;
  o.seed = 3;
  o.evaluate = false;
  o.parallel = ParallelLayout::kPipeline;
  o.stages = 2;
  o.virtual_stages = 2;
  o.micro_batches = 4;
  o.schedule = schedule;
  return o;
}

std::vector<double> losses_of(Trainer& trainer) {
  std::vector<double> losses;
  trainer.train([&](const TrainProgress& p) { losses.push_back(p.loss); });
  return losses;
}

// The chunk of an op from the cut the trainer prints (its layers' names, stage j at location
// j % locations), -1 for an op of no stage's layers (the data, the loss) and for a copy (named
// after what it copies, from another stage).
std::function<int(const Op&)> chunk_by_printed_cut(const std::vector<PipelineStage>& stages,
                                                   int locations) {
  std::map<std::string, int> chunk_of_layer;
  for (size_t j = 0; j < stages.size(); ++j)
    for (const std::string& layer : stages[j].layers)
      chunk_of_layer["::" + layer + "::"] = static_cast<int>(j) / locations;
  return [chunk_of_layer](const Op& op) {
    if (op.type() == "copy") return -1;
    for (const auto& [scope, chunk] : chunk_of_layer)
      if (op.name().find(scope) != std::string::npos) return chunk;
    return -1;
  };
}

}  // namespace

TEST_CASE(
    "interleaved stages: each location runs its chunks' passes in the schedule's order, and "
    "the model trains bit for bit as at one location",
    "[trainer][e2e][pipeline][determinism]") {
  TrainOptions accumulate = interleaved_run(PipelineSchedule::k1F1B);
  accumulate.parallel = ParallelLayout::kNone;
  accumulate.stages = 1;
  accumulate.virtual_stages = 1;
  Trainer one_location(accumulate);
  const std::vector<double> expected = losses_of(one_location);
  REQUIRE(expected.size() == 3);
  for (PipelineSchedule schedule :
       {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B, PipelineSchedule::kZBH1}) {
    INFO(name_of(schedule));
    Trainer trainer(interleaved_run(schedule));
    const std::vector<PipelineStage>& stages = trainer.pipeline_stages();
    REQUIRE(stages.size() == 4);
    for (size_t j = 0; j < stages.size(); ++j) CHECK(stages[j].location == static_cast<int>(j % 2));
    // Every stage at its location: its layers' ops there.
    for (const auto& op : trainer.training_graph().ops())
      for (size_t j = 0; j < stages.size(); ++j)
        if (op->role() == OpRole::kForward && op->type() != "copy" &&
            op->name().find("::" + stages[j].layers.front() + "::") != std::string::npos)
          CHECK(op->location() == Location::cpu(0, stages[j].location));
    PassRecorder recorder(trainer.training_graph(), 2, schedule == PipelineSchedule::kZBH1,
                          chunk_by_printed_cut(stages, 2));
    trainer.add_observer(&recorder);
    // Batch norm's running statistics chain the micro-batches' forwards in every chunk, and the
    // gradients add over the micro-batches in one order whatever the schedule.
    CHECK(losses_of(trainer) == expected);
    CHECK(stages_line(stages).rfind("stages by estimated work, stage j at location j mod 2: 0: ",
                                    0) == 0);
    for (int s = 0; s < 2; ++s) {
      INFO("location " << s);
      // Split (zbh1), the first stage's backward passes are no layer's ops (it has no input to
      // send a gradient to, only the sums of the gradients coming back): the recorder, going
      // by the layers, sees none of them.
      std::vector<double> costs;  // interleaved ZB-H1 orders a run of the stages' costs
      for (const PipelineStage& stage : stages) costs.push_back(stage.cost_share);
      std::vector<PipelineStep> expected;
      for (const PipelineStep& step : schedule_order(schedule, s, 2, 4, 2, costs))
        if (schedule != PipelineSchedule::kZBH1 || s != 0 || step.chunk != 0 ||
            step.pass != Pass::kBackward)
          expected.push_back(step);
      CHECK(recorder.passes()[s] == expected);
    }
  }
}

TEST_CASE(
    "interleaved stages over two GPUs (emulated) train as over two CPU locations, and steady "
    "iterations ask nothing of the devices",
    "[trainer][device][pipeline][determinism]") {
  // Emulated devices run the CPU kernels on the devices' queues: the orders of each GPU's
  // stages and the copies between the GPUs, with the CPU's arithmetic.
  dispatch::ScopedEmulatedDevices emulated(2);
  TrainOptions o = interleaved_run(PipelineSchedule::k1F1B);
  o.max_iters = 5;
  Trainer cpus(o);
  const std::vector<double> expected = losses_of(cpus);
  o.devices = {0, 1};
  Trainer gpus(o);
  DeviceCounters warm;
  std::vector<double> losses;
  gpus.train([&](const TrainProgress& p) {
    losses.push_back(p.loss);
    if (p.iteration == 2) warm = emulated.devices().counters();
  });
  CHECK(losses == expected);
  CHECK(warm.host_to_device_bytes > 0);  // the weights went to the GPUs
  const DeviceCounters end = emulated.devices().counters();
  CHECK(end.synchronizations == warm.synchronizations);
  CHECK(end.device_to_host_bytes == warm.device_to_host_bytes);
  CHECK(end.host_to_device_bytes == warm.host_to_device_bytes);
  CHECK(end.allocations == warm.allocations);
}

TEST_CASE("bad interleaved layouts are refused, naming the flag", "[trainer][pipeline]") {
  TrainOptions o = interleaved_run(PipelineSchedule::k1F1B);
  o.micro_batches = 2;
  o.stages = 4;
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("--virtual-stages=2 takes the micro-batches in "
                                                  "rounds of --stages=4 under --schedule=1f1b: "
                                                  "give --micro-batches a multiple of 4, got 2"));
  o.stages = 2;
  o.batch = 12;
  o.micro_batches = 3;
  o.schedule = PipelineSchedule::kZBH1;  // takes any number of micro-batches
  CHECK_NOTHROW(Trainer(o));
  o = interleaved_run(PipelineSchedule::k1F1B);
  o.parallel = ParallelLayout::kNone;
  o.stages = 1;
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("--virtual-stages=2 interleaves a pipeline's "
                                                  "stages over its locations: give --stages=S"));
  o = interleaved_run(PipelineSchedule::k1F1B);
  o.model = "mlp";
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("--stages=2 with --virtual-stages=2 cuts model "
                                                  "'mlp' into 4 stages, but it has 3 layers or "
                                                  "parts with parameters"));
  o.virtual_stages = 0;
  REQUIRE_THROWS_WITH(Trainer(o), Catch::Contains("--virtual-stages must be at least 1, got 0"));
}
