// TrainOptions: the closed choices by name (one parser for the CLI and config files) and
// validate_options(), the one place that checks options, in the flags' wording.

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "train/options.hpp"

using namespace purine;

TEST_CASE("every choice parses from its name and back", "[options]") {
  for (Reduction r : {Reduction::kRing, Reduction::kParameterServer, Reduction::kMpi})
    CHECK(parse_reduction(name_of(r)) == r);
  for (LrPolicy p : {LrPolicy::kFixed, LrPolicy::kStep, LrPolicy::kMultistep, LrPolicy::kPoly,
                     LrPolicy::kCosine})
    CHECK(parse_lr_policy(name_of(p)) == p);
  for (ParallelLayout l : {ParallelLayout::kNone, ParallelLayout::kData, ParallelLayout::kPipeline,
                           ParallelLayout::kModel, ParallelLayout::kHybrid})
    CHECK(parse_parallel_layout(name_of(l)) == l);
  for (dispatch::Mode m : {dispatch::Mode::kParallel, dispatch::Mode::kSerial})
    CHECK(parse_executor(name_of(m)) == m);
  for (GpuMath m : {GpuMath::kFp32, GpuMath::kTf32, GpuMath::kExact})
    CHECK(parse_math(name_of(m)) == m);
  for (RingSteps s : {RingSteps::kDirect, RingSteps::kRing, RingSteps::kMachines})
    CHECK(parse_ring_steps(name_of(s)) == s);
  CHECK(parse_ring_steps("auto") == std::nullopt);
  for (StageCut c : {StageCut::kParts, StageCut::kLayers}) CHECK(parse_stage_cut(name_of(c)) == c);
  CHECK(parse_reduction("ps") == Reduction::kParameterServer);
  CHECK(std::string(name_of(LrPolicy::kPoly)) == "poly");
}

TEST_CASE("an unknown name is refused, naming the flag and listing the valid names", "[options]") {
  REQUIRE_THROWS_WITH(parse_reduction("tree"),
                      "unknown reduction 'tree' for --reduce; choose ring, ps, mpi or nccl");
  REQUIRE_THROWS_WITH(parse_lr_policy("exp"),
                      "unknown learning-rate policy 'exp' for --lr-policy; choose fixed, step, "
                      "multistep, poly or cosine");
  REQUIRE_THROWS_WITH(
      parse_parallel_layout("tensor"),
      "unknown parallel layout 'tensor' for --parallel; choose none, data, pipeline, model or "
      "hybrid");
  REQUIRE_THROWS_WITH(parse_executor("magic"),
                      "unknown executor 'magic' for --executor; choose parallel or serial");
  REQUIRE_THROWS_WITH(parse_math("bf16"),
                      "unknown GPU math 'bf16' for --math; choose fp32, tf32 or exact");
  REQUIRE_THROWS_WITH(parse_ring_steps("tree"),
                      "unknown way of moving the ring's chunks 'tree' "
                      "for --ring-steps; choose auto, direct, ring or machines");
  REQUIRE_THROWS_WITH(parse_stage_cut("branches"),
                      "unknown stage cut 'branches' for --stage-cut; choose parts or layers");
  // Names are matched exactly.
  REQUIRE_THROWS_AS(parse_reduction("Ring"), Error);
  REQUIRE_THROWS_AS(parse_reduction(""), Error);
}

TEST_CASE("the default options are valid", "[options]") {
  TrainOptions o;
  o.ranks = 1;
  o.rank = 0;
  REQUIRE_NOTHROW(validate_options(o));
}

namespace {
// The message validate_options throws for the default options with `change` applied.
template <class Change>
std::string rejection(Change change) {
  TrainOptions o;
  o.ranks = 1;
  o.rank = 0;
  change(o);
  try {
    validate_options(o);
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}
}  // namespace

TEST_CASE("validate_options names the flag, the value and what is expected", "[options]") {
  CHECK(rejection([](TrainOptions& o) { o.lr = INFINITY; }) ==
        "--lr must be positive and finite, got inf");
  CHECK(rejection([](TrainOptions& o) { o.batch = -2; }) == "--batch must be positive, got -2");
  CHECK(rejection([](TrainOptions& o) { o.threads = 0; }) ==
        "--threads must be in [1, 1024], got 0");
  CHECK(rejection([](TrainOptions& o) { o.test_samples = -1; }) ==
        "--test-samples must be non-negative, got -1");
  CHECK(rejection([](TrainOptions& o) { o.stall_timeout = std::chrono::seconds(-5); }) ==
        "--stall-timeout must be positive, got -5");
  CHECK(rejection([](TrainOptions& o) { o.bucket_kb = -1; }) ==
        "--bucket-kb must be non-negative, got -1");
}

TEST_CASE("number lists parse exactly, naming the piece that is not a number", "[options]") {
  CHECK(parse_number_list("0.6,0.85", "--x") == std::vector<double>{0.6, 0.85});
  CHECK(parse_number_list("1e-1", "--x") == std::vector<double>{0.1});
  CHECK(parse_number_list("", "--x").empty());
  REQUIRE_THROWS_WITH(parse_number_list("0.6,,0.8", "--lr-milestones"),
                      "--lr-milestones takes comma-separated numbers; '' is not one (in "
                      "'0.6,,0.8')");
  REQUIRE_THROWS_WITH(parse_number_list("0.6x", "--x"), Catch::Contains("'0.6x' is not one"));
  REQUIRE_THROWS_WITH(parse_number_list("nan", "--x"), Catch::Contains("'nan' is not one"));
}

TEST_CASE("validate_options checks the schedule", "[options]") {
  CHECK(rejection([](TrainOptions& o) {
          o.lr_policy = LrPolicy::kMultistep;
          o.lr_milestones.clear();
        }) == "--lr-policy=multistep needs --lr-milestones");
  CHECK(rejection([](TrainOptions& o) {
          o.lr_milestones = {0.5, 1.0};
        }) == "--lr-milestones are fractions of the training in (0, 1), got 1");
  CHECK(rejection([](TrainOptions& o) {
          o.lr_milestones = {0.5, 0.5};
        }) == "--lr-milestones must increase, got 0.5 then 0.5");
  CHECK(rejection([](TrainOptions& o) { o.lr_warmup = -3; }) ==
        "--lr-warmup must be non-negative, got -3");
  CHECK(rejection([](TrainOptions& o) { o.lr_warmup_start = 0; }) ==
        "--lr-warmup-start must be in (0, 1], got 0");
  CHECK(rejection([](TrainOptions& o) {
          o.stage_trace = "t.json";
          o.stage_seconds = {{"mlp::fc1::inner_product", 1e-3}};
        }) == "--stage-trace='t.json' cuts a pipeline's stages: give --stages=S (S >= 2)");
}

TEST_CASE("validate_options checks the layout", "[options][locations]") {
  // Several ranks or locations need the data-parallel layout.
  CHECK(rejection([](TrainOptions& o) {
          o.ranks = 3;
          o.rank = 1;
        }) == "running on 3 MPI ranks needs --parallel=data, pipeline, model or hybrid");
  CHECK(rejection([](TrainOptions& o) { o.locations = 2; }) ==
        "--locations=2 needs --parallel=data, model or hybrid");
  // Model parallelism and the hybrid layouts.
  CHECK(rejection([](TrainOptions& o) {
          o.parallel = ParallelLayout::kModel;
          o.ranks = 2;
          o.locations = 2;
          o.split = {"fc1", "fc2"};
        }) == "(accepted)");
  CHECK(rejection([](TrainOptions& o) { o.parallel = ParallelLayout::kModel; }) ==
        "--parallel=model needs the layers to split: give --split=LAYERS");
  // Split over one location: nothing would be split (regression: it trained unsplit, silently).
  CHECK(rejection([](TrainOptions& o) {
          o.parallel = ParallelLayout::kModel;
          o.split = {"fc1", "fc2"};
        }) ==
        "--parallel=model splits layers over locations: give --locations=N (N >= 2), --devices, "
        "or several ranks");
  CHECK(rejection([](TrainOptions& o) {
          o.parallel = ParallelLayout::kModel;
          o.split = {"fc1", "fc2"};
          o.ranks = 2;
        }) == "(accepted)");
  CHECK(rejection([](TrainOptions& o) {
          o.parallel = ParallelLayout::kHybrid;
          o.split = {"fc1", "fc2"};
          o.ranks = 2;
        }) ==
        "--parallel=hybrid with --split splits each rank's replica over the rank's locations: "
        "give --locations=N (N >= 2) or --devices");
  CHECK(rejection([](TrainOptions& o) {
          o.parallel = ParallelLayout::kData;
          o.split = {"fc1"};
        }) == "--split needs --parallel=model or hybrid");
  for (int stages : {1, 2})
    CHECK(rejection([&](TrainOptions& o) {
            o.parallel = ParallelLayout::kHybrid;
            o.ranks = 2;
            o.stages = stages;
            if (stages > 1) o.split = {"fc1"};
          }) ==
          "--parallel=hybrid lays out each rank's replica by --split=LAYERS or by "
          "--stages=S: give one of them");
  CHECK(rejection([](TrainOptions& o) {
          o.parallel = ParallelLayout::kHybrid;
          o.ranks = 2;
          o.stages = 3;
        }) == "(accepted)");
  CHECK(rejection([](TrainOptions& o) {
          o.parallel = ParallelLayout::kHybrid;
          o.stages = 2;
          o.locations = 2;
        }) == "--parallel=hybrid places its stages itself; drop --locations=2");
  CHECK(parse_name_list("fc1,fc2", "--split") == std::vector<std::string>{"fc1", "fc2"});
  CHECK(parse_name_list("", "--split").empty());
  CHECK_THROWS_WITH(parse_name_list("fc1,,fc2", "--split"),
                    "--split=fc1,,fc2: an empty name; separate names by commas");
  CHECK(rejection([](TrainOptions& o) {
          o.parallel = ParallelLayout::kData;
          o.ranks = 3;
          o.rank = 1;
          o.locations = 2;
        }) == "(accepted)");
  CHECK(rejection([](TrainOptions& o) {
          o.parallel = ParallelLayout::kData;
          o.locations = 2;
          o.reduce = Reduction::kMpi;
        }) == "--reduce=mpi joins one replica per rank; with --locations=2 use ring or ps");
  CHECK(rejection([](TrainOptions& o) { o.rank = 1; }) == "rank 1 of 1 ranks");
  // A pipeline over ranks has a stage per rank.
  CHECK(rejection([](TrainOptions& o) {
          o.parallel = ParallelLayout::kPipeline;
          o.ranks = 2;
          o.stages = 2;
        }) == "(accepted)");
  CHECK(rejection([](TrainOptions& o) {
          o.parallel = ParallelLayout::kPipeline;
          o.ranks = 2;
          o.stages = 3;
        }) == "a pipeline over 2 MPI ranks has one stage per rank: give --stages=2, got 3");
}

TEST_CASE("validate_options checks the GPU list", "[options][devices]") {
  CHECK(rejection([](TrainOptions& o) { o.devices = {0}; }) == "(accepted)");
  CHECK(rejection([](TrainOptions& o) {
          o.devices = {0, 1};
        }) == "--devices=0,1 needs --parallel=data, model or hybrid");
  CHECK(rejection([](TrainOptions& o) {
          o.parallel = ParallelLayout::kData;
          o.devices = {1, 0};
        }) == "(accepted)");
  CHECK(rejection([](TrainOptions& o) {
          o.parallel = ParallelLayout::kData;
          o.devices = {2, 2};
        }) == "--devices lists GPU 2 twice");
  CHECK(rejection([](TrainOptions& o) {
          o.parallel = ParallelLayout::kData;
          o.devices = {0, 1, 2};
        }) == "--batch 64 does not split evenly over 3 devices");
  CHECK(rejection([](TrainOptions& o) {
          o.parallel = ParallelLayout::kData;
          o.devices = {0};
          o.locations = 2;
        }) == "--locations=2 places replicas on CPUs; with --devices every replica is on its GPU");
  CHECK(rejection([](TrainOptions& o) { o.reduce = Reduction::kNccl; }) ==
        "--reduce=nccl reduces between GPUs: train with --device=N");
  const std::string run_ahead_needs =
      "--run-ahead launches an iteration's CUDA graph while the one before runs: train at a GPU "
      "(--device=N) with CUDA graphs (without --nocuda-graph)";
  CHECK(rejection([](TrainOptions& o) { o.run_ahead = true; }) == run_ahead_needs);
  CHECK(rejection([](TrainOptions& o) {
          o.run_ahead = true;
          o.devices = {0};
          o.cuda_graph = false;
        }) == run_ahead_needs);
  CHECK(rejection([](TrainOptions& o) {
          o.parallel = ParallelLayout::kData;
          o.devices = {0, 1};
          o.reduce = Reduction::kNccl;
        }) == "--reduce=nccl joins one replica per rank; with --devices=0,1 use ring or ps");
  CHECK(parse_reduction("nccl") == Reduction::kNccl);
  CHECK(parse_device_list("0,3", "--devices") == std::vector<int>{0, 3});
  CHECK(parse_device_list("", "--devices").empty());
  REQUIRE_THROWS_WITH(
      parse_device_list("1.5", "--devices"),
      "--devices: '1.5' is no GPU ordinal (0, 1, ...; `purine devices` lists them)");
  REQUIRE_THROWS_WITH(parse_device_list("-1", "--devices"), Catch::Contains("no GPU ordinal"));
}

TEST_CASE("validate_options checks checkpoints and resuming", "[options]") {
  CHECK(rejection([](TrainOptions& o) { o.checkpoint_every = 10; }) ==
        "--checkpoint-every needs --checkpoint-dir");
  CHECK(rejection([](TrainOptions& o) {
          o.checkpoint_dir = "ckpts";
          o.keep = 0;
        }) == "--keep must be at least 1, got 0");
  CHECK(rejection([](TrainOptions& o) { o.resume = true; }) ==
        "--resume continues from --checkpoint-dir or --checkpoint=FILE; give one");
  CHECK(rejection([](TrainOptions& o) {
          o.resume = true;
          o.checkpoint_path = "ckpt";
        }) == "(accepted)");
  CHECK(rejection([](TrainOptions& o) {
          o.resume = true;
          o.checkpoint_dir = "ckpts";
          o.resume_from = "ckpt";
        }) == "give --resume or --resume-from=FILE, not both");
}

TEST_CASE("synthetic data is parsed from --data", "[options][synthetic]") {
  SyntheticData spec;
  CHECK_FALSE(parse_synthetic_data("/usr/share/datasets/fashion-mnist", &spec));
  REQUIRE(parse_synthetic_data("synthetic:3x224x224:1000", &spec));
  CHECK(spec.channels == 3);
  CHECK(spec.rows == 224);
  CHECK(spec.cols == 224);
  CHECK(spec.classes == 1000);
  for (const char* bad :
       {"synthetic:3x224:1000", "synthetic:0x2x2:10", "synthetic:1x2x2:10x", "synthetic:"}) {
    INFO(bad);
    REQUIRE_THROWS_WITH(parse_synthetic_data(bad, &spec),
                        Catch::Contains("is written synthetic:CxHxW:CLASSES"));
  }
  CHECK(rejection([](TrainOptions& o) { o.data_dir = "synthetic:1x1"; }) ==
        "--data=synthetic:1x1: synthetic data is written synthetic:CxHxW:CLASSES with positive "
        "numbers, e.g. synthetic:3x224x224:1000");
}

namespace {

// Runs f on a new thread whose CPU affinity is `cpus` (all this process's CPUs when empty),
// with OMPI_COMM_WORLD_LOCAL_SIZE set to `local_ranks` (unset when 0); returns f's result, or -1
// if the affinity could not be set.
int with_cpus_and_ranks(const std::vector<int>& cpus, int local_ranks, int (*f)()) {
  int result = -1;
  std::thread([&] {
    if (!cpus.empty()) {
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int cpu : cpus) CPU_SET(cpu, &set);
      if (sched_setaffinity(0, sizeof(set), &set) != 0)
        return;  // -1: no assertion off the main thread
    }
    const char* before = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const std::string saved = before ? before : "";
    if (local_ranks > 0) {
      setenv("OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(local_ranks).c_str(), 1);
    } else {
      unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    }
    result = f();
    if (before) {
      setenv("OMPI_COMM_WORLD_LOCAL_SIZE", saved.c_str(), 1);
    } else {
      unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    }
  }).join();
  return result;
}

}  // namespace

TEST_CASE("automatic threads take the cores of the affinity, shared among unbound ranks",
          "[options]") {
  cpu_set_t mine;
  REQUIRE(sched_getaffinity(0, sizeof(mine), &mine) == 0);
  const int cpus = CPU_COUNT(&mine);
  int first = 0;
  while (!CPU_ISSET(first, &mine)) ++first;
  // Bound to one CPU, as mpirun binds a rank to a core: one thread, however many ranks share the
  // machine.
  CHECK(with_cpus_and_ranks({first}, 0, automatic_threads) == 1);
  CHECK(with_cpus_and_ranks({first}, 4, automatic_threads) == 1);
  // All of them: a thread per physical core (SMT siblings once), at least 1.
  const int all = with_cpus_and_ranks({}, 0, automatic_threads);
  CHECK(all >= 1);
  CHECK(all <= cpus);
  if (cpus == static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))) {
    // Unbound ranks of one machine share its cores evenly, each keeping at least one.
    CHECK(with_cpus_and_ranks({}, 2, automatic_threads) == std::max(1, all / 2));
    CHECK(with_cpus_and_ranks({}, 4 * cpus, automatic_threads) == 1);
  }
}
