#include "train/options.hpp"

#include <glog/logging.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "base/error.hpp"

namespace purine {

namespace {

// One closed choice: its value and the name users type for it.
template <class E>
struct Choice {
  E value;
  const char* name;
};

constexpr Choice<Reduction> kReductions[] = {{Reduction::kRing, "ring"},
                                             {Reduction::kParameterServer, "ps"},
                                             {Reduction::kMpi, "mpi"},
                                             {Reduction::kNccl, "nccl"}};
constexpr Choice<LrPolicy> kLrPolicies[] = {{LrPolicy::kFixed, "fixed"},
                                            {LrPolicy::kStep, "step"},
                                            {LrPolicy::kMultistep, "multistep"},
                                            {LrPolicy::kPoly, "poly"},
                                            {LrPolicy::kCosine, "cosine"}};
constexpr Choice<ParallelLayout> kParallelLayouts[] = {{ParallelLayout::kNone, "none"},
                                                       {ParallelLayout::kData, "data"},
                                                       {ParallelLayout::kPipeline, "pipeline"},
                                                       {ParallelLayout::kModel, "model"},
                                                       {ParallelLayout::kHybrid, "hybrid"}};
constexpr Choice<PipelineSchedule> kSchedules[] = {{PipelineSchedule::kGPipe, "gpipe"},
                                                   {PipelineSchedule::k1F1B, "1f1b"},
                                                   {PipelineSchedule::kZBH1, "zbh1"}};
constexpr Choice<StageCut> kStageCuts[] = {{StageCut::kParts, "parts"},
                                           {StageCut::kLayers, "layers"}};
constexpr Choice<GpuMath> kMaths[] = {
    {GpuMath::kFp32, "fp32"}, {GpuMath::kTf32, "tf32"}, {GpuMath::kExact, "exact"}};
constexpr Choice<Optimizer> kOptimizers[] = {
    {Optimizer::kSgd, "sgd"}, {Optimizer::kAdam, "adam"}, {Optimizer::kAdamW, "adamw"}};
constexpr Choice<RingSteps> kRingSteps[] = {
    {RingSteps::kDirect, "direct"}, {RingSteps::kRing, "ring"}, {RingSteps::kMachines, "machines"}};
constexpr Choice<dispatch::Mode> kExecutors[] = {{dispatch::Mode::kParallel, "parallel"},
                                                 {dispatch::Mode::kSerial, "serial"}};

// "a, b or c"
template <class E, size_t N>
std::string listed(const Choice<E> (&choices)[N]) {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) out += i + 1 == N ? " or " : ", ";
    out += choices[i].name;
  }
  return out;
}

// `what` names the kind of choice, `flag` the option it is given by.
template <class E, size_t N>
E parse(const Choice<E> (&choices)[N], const std::string& name, const char* what,
        const char* flag) {
  for (const Choice<E>& c : choices)
    if (name == c.name) return c.value;
  throw Error(str("unknown ", what, " '", name, "' for ", flag, "; choose ", listed(choices)));
}

template <class E, size_t N>
const char* name_in(const Choice<E> (&choices)[N], E value) {
  for (const Choice<E>& c : choices)
    if (value == c.value) return c.name;
  LOG(FATAL) << "no name for choice " << static_cast<int>(value);
  return "";
}

}  // namespace

Reduction parse_reduction(const std::string& name) {
  return parse(kReductions, name, "reduction", "--reduce");
}
LrPolicy parse_lr_policy(const std::string& name) {
  return parse(kLrPolicies, name, "learning-rate policy", "--lr-policy");
}
ParallelLayout parse_parallel_layout(const std::string& name) {
  return parse(kParallelLayouts, name, "parallel layout", "--parallel");
}
PipelineSchedule parse_schedule(const std::string& name) {
  return parse(kSchedules, name, "pipeline schedule", "--schedule");
}
StageCut parse_stage_cut(const std::string& name) {
  return parse(kStageCuts, name, "stage cut", "--stage-cut");
}
GpuMath parse_math(const std::string& name) { return parse(kMaths, name, "GPU math", "--math"); }
std::optional<RingSteps> parse_ring_steps(const std::string& name) {
  if (name == "auto") return std::nullopt;
  for (const Choice<RingSteps>& c : kRingSteps)
    if (name == c.name) return c.value;
  throw Error(str("unknown way of moving the ring's chunks '", name,
                  "' for --ring-steps; choose auto, ", listed(kRingSteps)));
}
Optimizer parse_optimizer(const std::string& name) {
  return parse(kOptimizers, name, "optimizer", "--optimizer");
}
dispatch::Mode parse_executor(const std::string& name) {
  return parse(kExecutors, name, "executor", "--executor");
}
std::vector<double> parse_number_list(const std::string& text, const char* flag) {
  std::vector<double> numbers;
  if (text.empty()) return numbers;
  size_t begin = 0;
  while (true) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string piece = text.substr(begin, end - begin);
    size_t used = 0;
    double value = 0;
    try {
      value = std::stod(piece, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    require(used > 0 && used == piece.size() && std::isfinite(value), flag,
            " takes comma-separated numbers; '", piece, "' is not one (in '", text, "')");
    numbers.push_back(value);
    if (end == text.size()) return numbers;
    begin = end + 1;
  }
}

bool parse_synthetic_data(const std::string& data, SyntheticData* spec) {
  const std::string prefix = "synthetic:";
  if (data.rfind(prefix, 0) != 0) return false;
  const std::string text = data.substr(prefix.size());
  long long c = 0, h = 0, w = 0, classes = 0;
  char tail = 0;
  const bool parsed =
      std::sscanf(text.c_str(), "%lldx%lldx%lld:%lld%c", &c, &h, &w, &classes, &tail) == 4;
  require(parsed && c > 0 && h > 0 && w > 0 && classes > 0, "--data=", data,
          ": synthetic data is written synthetic:CxHxW:CLASSES with positive numbers, e.g. "
          "synthetic:3x224x224:1000");
  *spec = {c, h, w, classes};
  return true;
}

int replicas_per_rank(const TrainOptions& o) {
  // One pipeline or split model per rank, or in all.
  if (o.parallel == ParallelLayout::kPipeline || o.parallel == ParallelLayout::kModel ||
      o.parallel == ParallelLayout::kHybrid)
    return 1;
  return o.devices.empty() ? o.locations : static_cast<int>(o.devices.size());
}

std::vector<std::string> parse_name_list(const std::string& text, const char* flag) {
  std::vector<std::string> names;
  if (text.empty()) return names;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    names.push_back(text.substr(start, comma == std::string::npos ? comma : comma - start));
    require(!names.back().empty(), flag, "=", text, ": an empty name; separate names by commas");
    if (comma == std::string::npos) return names;
    start = comma + 1;
  }
}

std::vector<int> parse_device_list(const std::string& text, const char* flag) {
  std::vector<int> devices;
  for (double d : parse_number_list(text, flag)) {
    require(d >= 0 && d == std::floor(d) && d < 1024, flag, ": '", d,
            "' is no GPU ordinal (0, 1, ...; `purine devices` lists them)");
    devices.push_back(static_cast<int>(d));
  }
  return devices;
}

const char* name_of(Reduction reduction) { return name_in(kReductions, reduction); }
const char* name_of(LrPolicy policy) { return name_in(kLrPolicies, policy); }
const char* name_of(ParallelLayout layout) { return name_in(kParallelLayouts, layout); }
const char* name_of(dispatch::Mode mode) { return name_in(kExecutors, mode); }
const char* name_of(PipelineSchedule schedule) { return name_in(kSchedules, schedule); }
const char* name_of(StageCut cut) { return name_in(kStageCuts, cut); }
const char* name_of(GpuMath math) { return name_in(kMaths, math); }
const char* name_of(RingSteps steps) { return name_in(kRingSteps, steps); }
const char* name_of(Optimizer optimizer) { return name_in(kOptimizers, optimizer); }

namespace {

// The CPUs this process may run on and the Open MPI ranks it shares this machine with.
struct CpuShare {
  int cpus = 0;           // logical CPUs in its affinity (0: unknown)
  int cores = 0;          // physical cores among them, SMT siblings counted once
  bool launched = false;  // by mpirun: OMPI_COMM_WORLD_LOCAL_SIZE is set
  int local_ranks = 1;    // the job's ranks on this machine
  bool unbound = false;   // the affinity holds every online CPU (mpirun bound it to none)
};

// The number in /sys/devices/system/cpu/cpuN/topology/FIELD, or -1.
long cpu_topology(int cpu, const char* field) {
  const std::string path = str("/sys/devices/system/cpu/cpu", cpu, "/topology/", field);
  std::FILE* file = std::fopen(path.c_str(), "r");
  if (!file) return -1;
  long value = -1;
  if (std::fscanf(file, "%ld", &value) != 1) value = -1;
  std::fclose(file);
  return value;
}

CpuShare cpu_share() {
  CpuShare share;
  const char* local_size = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  share.launched = local_size != nullptr;
  share.local_ranks = share.launched ? std::max(1, std::atoi(local_size)) : 1;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return share;
  share.cpus = CPU_COUNT(&allowed);
  share.unbound = share.cpus >= sysconf(_SC_NPROCESSORS_ONLN);
  std::set<std::pair<long, long>> cores;  // (package, core)
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    const long package = cpu_topology(cpu, "physical_package_id"),
               core = cpu_topology(cpu, "core_id");
    if (package < 0 || core < 0) {  // no topology to read: count every CPU
      cores.clear();
      break;
    }
    cores.insert({package, core});
  }
  share.cores = cores.empty() ? share.cpus : static_cast<int>(cores.size());
  return share;
}

}  // namespace

int automatic_threads() {
  const CpuShare share = cpu_share();
  if (share.cores == 0) return 1;
  int threads = share.cores;
  if (share.local_ranks > 1 && share.unbound) threads /= share.local_ranks;
  return std::clamp(threads, 1, kMaxThreads);
}

std::string threads_warning(const TrainOptions& o) {
  const CpuShare share = cpu_share();
  if (share.cpus == 0) return "";
  const int cpus = share.cpus, local = share.local_ranks;
  const std::string who = share.launched || o.ranks > 1 ? str("rank ", o.rank) : "this process";
  if (o.threads > cpus)
    return str(who, " may run on ", cpus, " core", cpus == 1 ? "" : "s",
               " (its CPU affinity) but --threads=", o.threads,
               "; the threads will take turns, many times slower: give --threads=", cpus,
               share.launched ? str(", or let mpirun give each rank more cores (--bind-to none, or "
                                    "--map-by slot:PE=",
                                    o.threads, ")")
                              : std::string(" or run it on more cores"));
  // Unbound ranks of one machine each see every core: their threads together must fit.
  if (local > 1 && share.unbound && static_cast<int64_t>(local) * o.threads > cpus)
    return str(local, " ranks on this machine with --threads=", o.threads, " run ",
               local * o.threads, " threads on ", cpus, " core", cpus == 1 ? "" : "s",
               "; they will take turns, many times slower: give --threads=",
               std::max(1, cpus / local), cpus < local ? " and fewer ranks per machine" : "");
  return "";
}

void validate_options(const TrainOptions& o) {
  // Numbers that would train nothing, or crash.
  require(o.batch > 0, "--batch must be positive, got ", o.batch);
  require(o.epochs > 0, "--epochs must be positive, got ", o.epochs);
  require(o.max_iters >= 0, "--max-iters must be non-negative, got ", o.max_iters);
  require(std::isfinite(o.lr) && o.lr > 0, "--lr must be positive and finite, got ", o.lr);
  require(std::isfinite(o.weight_decay) && o.weight_decay >= 0,
          "--weight-decay must be non-negative and finite, got ", o.weight_decay);
  require(std::isfinite(o.momentum) && o.momentum >= 0 && o.momentum < 1,
          "--momentum must be in [0, 1), got ", o.momentum);
  require(std::isfinite(o.beta1) && o.beta1 >= 0 && o.beta1 < 1 && std::isfinite(o.beta2) &&
              o.beta2 >= 0 && o.beta2 < 1,
          "--beta1 and --beta2 must be in [0, 1), got ", o.beta1, " and ", o.beta2);
  require(std::isfinite(o.eps) && o.eps > 0, "--eps must be positive, got ", o.eps);
  require(std::isfinite(o.clip_norm) && o.clip_norm >= 0,
          "--clip-norm must be non-negative (0: no clipping), got ", o.clip_norm);
  require(std::isfinite(o.lr_gamma) && o.lr_gamma > 0,
          "--lr-gamma must be positive and finite, got ", o.lr_gamma);
  require(std::isfinite(o.lr_power) && o.lr_power > 0,
          "--lr-power must be positive and finite, got ", o.lr_power);
  require(o.lr_step >= 0, "--lr-step must be non-negative (0: one epoch), got ", o.lr_step);
  require(o.lr_policy != LrPolicy::kMultistep || !o.lr_milestones.empty(),
          "--lr-policy=multistep needs --lr-milestones");
  for (size_t i = 0; i < o.lr_milestones.size(); ++i) {
    const double m = o.lr_milestones[i];
    require(m > 0 && m < 1, "--lr-milestones are fractions of the training in (0, 1), got ", m);
    if (i > 0)  // (require evaluates its message: no lr_milestones[-1])
      require(m > o.lr_milestones[i - 1], "--lr-milestones must increase, got ",
              o.lr_milestones[i - 1], " then ", m);
  }
  require(o.lr_warmup >= 0, "--lr-warmup must be non-negative, got ", o.lr_warmup);
  require(std::isfinite(o.lr_warmup_start) && o.lr_warmup_start > 0 && o.lr_warmup_start <= 1,
          "--lr-warmup-start must be in (0, 1], got ", o.lr_warmup_start);
  require(o.threads > 0 && o.threads <= kMaxThreads, "--threads must be in [1, ", kMaxThreads,
          "], got ", o.threads);
  require(o.classes > 0, "--classes must be positive, got ", o.classes);
  require(std::isfinite(o.input_mean), "--input-mean must be finite, got ", o.input_mean);
  require(std::isfinite(o.input_std) && o.input_std > 0,
          "--input-std must be positive and finite, got ", o.input_std);
  require(o.bucket_kb >= 0, "--bucket-kb must be non-negative, got ", o.bucket_kb);
  require(o.test_batch > 0, "test batch must be positive, got ", o.test_batch);
  require(o.test_samples >= 0, "--test-samples must be non-negative, got ", o.test_samples);
  require(o.test_every >= kTestEveryEpoch,
          "--test-every must be N >= 0 iterations (0: when training "
          "ends) or -1 (every epoch), got ",
          o.test_every);
  require(o.stall_timeout.count() > 0, "--stall-timeout must be positive, got ",
          o.stall_timeout.count() / 1000.0);

  SyntheticData synthetic;
  parse_synthetic_data(o.data_dir, &synthetic);  // throws on a malformed synthetic spec

  // The parallel layout.
  require(o.ranks >= 1 && o.rank >= 0 && o.rank < o.ranks, "rank ", o.rank, " of ", o.ranks,
          " ranks");
  require(o.locations > 0, "--locations must be positive, got ", o.locations);
  require(o.devices.empty() || o.locations == 1, "--locations=", o.locations,
          " places replicas on CPUs; with --devices every replica is on its GPU");
  for (size_t i = 0; i < o.devices.size(); ++i) {
    require(o.devices[i] >= 0, "--devices: GPU ", o.devices[i], " is no device ordinal");
    for (size_t j = 0; j < i; ++j)
      require(o.devices[j] != o.devices[i], "--devices lists GPU ", o.devices[i], " twice");
  }
  const int replicas = replicas_per_rank(o);
  // The flag that made the replicas: "--locations=2" or "--devices=0,1".
  std::string replica_flag = str("--locations=", o.locations);
  if (!o.devices.empty()) {
    replica_flag = "--devices=";
    for (size_t i = 0; i < o.devices.size(); ++i) replica_flag += str(i ? "," : "", o.devices[i]);
  }
  require(o.batch % replicas == 0, "--batch ", o.batch, " does not split evenly over ", replicas,
          o.devices.empty() ? " locations" : " devices");
  require(o.micro_batches >= 1, "--micro-batches must be at least 1, got ", o.micro_batches);
  require(o.batch / replicas % o.micro_batches == 0, "--micro-batches=", o.micro_batches,
          " does not divide the batch of ", o.batch / replicas, " images",
          replicas > 1 ? " per replica" : "");
  require(replicas == 1 || (o.reduce != Reduction::kMpi && o.reduce != Reduction::kNccl),
          "--reduce=", name_of(o.reduce), " joins one replica per rank; with ", replica_flag,
          " use ring or ps");
  require(o.reduce != Reduction::kNccl || !o.devices.empty(),
          "--reduce=nccl reduces between GPUs: train with --device=N");
  require(!o.run_ahead || (!o.devices.empty() && o.cuda_graph),
          "--run-ahead launches an iteration's CUDA graph while the one before runs: train at a "
          "GPU (--device=N) with CUDA graphs (without --nocuda-graph)");
  require(replicas == 1 || o.parallel == ParallelLayout::kData, replica_flag,
          " needs --parallel=data, model or hybrid");
  require(o.parallel != ParallelLayout::kNone || o.ranks == 1, "running on ", o.ranks,
          " MPI ranks needs --parallel=data, pipeline, model or hybrid");
  const bool hybrid = o.parallel == ParallelLayout::kHybrid;
  require(!o.split.empty() || o.parallel != ParallelLayout::kModel,
          "--parallel=model needs the layers to split: give --split=LAYERS");
  require(o.split.empty() || o.parallel == ParallelLayout::kModel || hybrid,
          "--split needs --parallel=model or hybrid");
  require(!hybrid || o.split.empty() != (o.stages == 1),
          "--parallel=hybrid lays out each rank's replica by --split=LAYERS or by --stages=S: "
          "give one of them");
  // Splitting over one location splits nothing: say so rather than train unsplit.
  const int split_locations = o.devices.empty() ? o.locations : static_cast<int>(o.devices.size());
  require(o.parallel != ParallelLayout::kModel || o.split.empty() || split_locations * o.ranks >= 2,
          "--parallel=model splits layers over locations: give --locations=N (N >= 2), "
          "--devices, or several ranks");
  require(!hybrid || o.split.empty() || split_locations >= 2,
          "--parallel=hybrid with --split splits each rank's replica over the rank's locations: "
          "give --locations=N (N >= 2) or --devices");
  require(o.stages == 1 || o.parallel == ParallelLayout::kPipeline || hybrid, "--stages=", o.stages,
          " needs --parallel=pipeline or hybrid");
  require(o.stage_seconds.empty() || o.stages > 1, "--stage-trace='", o.stage_trace,
          "' cuts a pipeline's stages: give --stages=S (S >= 2)");
  require(o.virtual_stages >= 1, "--virtual-stages must be at least 1, got ", o.virtual_stages);
  if (o.virtual_stages > 1) {
    require(o.stages > 1, "--virtual-stages=", o.virtual_stages,
            " interleaves a pipeline's stages over its locations: give --stages=S (S >= 2)");
    // The interleaved zero-bubble schedule takes any number (graphs/zero_bubble_interleaved.hpp).
    require(o.micro_batches % o.stages == 0 || o.schedule == PipelineSchedule::kZBH1,
            "--virtual-stages=", o.virtual_stages,
            " takes the micro-batches in rounds of --stages=", o.stages,
            " under --schedule=", name_of(o.schedule), ": give --micro-batches a multiple of ",
            o.stages, ", got ", o.micro_batches);
  }
  if (o.parallel == ParallelLayout::kPipeline || (hybrid && o.split.empty())) {
    require(o.stages >= 1, "--stages must be at least 1, got ", o.stages);
    require(o.locations == 1, "--parallel=", name_of(o.parallel),
            " places its stages itself; drop --locations=", o.locations);
    if (o.ranks == 1 || hybrid) {
      require(o.devices.empty() || static_cast<int>(o.devices.size()) == o.stages,
              "--stages=", o.stages, " on GPUs needs as many --devices, got ", o.devices.size());
    } else {
      require(o.ranks == o.stages, "a pipeline over ", o.ranks, " MPI ranks has one stage per ",
              "rank: give --stages=", o.ranks, ", got ", o.stages);
      require(o.devices.size() <= 1, "a pipeline over MPI ranks puts each stage on one GPU of ",
              "its rank: give one --device");
    }
  }

  // Checkpoints.
  require(o.checkpoint_every >= 0, "--checkpoint-every must be non-negative, got ",
          o.checkpoint_every);
  require(o.checkpoint_every == 0 || !o.checkpoint_dir.empty(),
          "--checkpoint-every needs --checkpoint-dir");
  require(o.keep >= 1, "--keep must be at least 1, got ", o.keep);
  require(!(o.resume && !o.resume_from.empty()), "give --resume or --resume-from=FILE, not both");
  require(!o.resume || !o.checkpoint_dir.empty() || !o.checkpoint_path.empty(),
          "--resume continues from --checkpoint-dir or --checkpoint=FILE; give one");
}

}  // namespace purine
