// TrainOptions: everything one training run is told (model, data, schedule, parallel layout,
// checkpoints, outputs), its closed choices as enums. validate_options() is the one place that
// checks them, and parse_*() the one place that reads the names users type for the choices; the
// CLI (tools/cli/train_command.cpp) uses both, as a config file would. Their messages name an
// option as the CLI spells it (`--lr must be positive and finite, got inf`), so that the CLI
// shows them as they are. A value type and functions without state; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dispatcher/engine.hpp"
#include "graphs/allreduce.hpp"
#include "graphs/lr_schedule.hpp"
#include "graphs/pipeline.hpp"
#include "graphs/sgd.hpp"
#include "operators/gpu_kernel.hpp"
#include "purine/mpi.hpp"

namespace purine {

// How the training is laid out: one process with one location (kNone), data parallel over
// the MPI ranks and the `locations` of each (kData), a pipeline of `stages` (kPipeline,
// graphs/pipeline.hpp): one stage per CPU location of the process, per listed GPU, or per rank,
// the `split` layers split over every location of every rank (kModel, graphs/
// model_parallel.hpp), or data parallel over the ranks with each rank's replica laid out over
// its own locations, as a pipeline of `stages` or with the `split` layers split (kHybrid).
enum class ParallelLayout { kNone, kData, kPipeline, kModel, kHybrid };

// TrainOptions::test_every: evaluate at the end of every epoch.
constexpr int64_t kTestEveryEpoch = -1;

struct TrainOptions {
  std::string model = "convnet_bn";
  // IDX files, or "synthetic:CxHxW:CLASSES" (parse_synthetic_data below).
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int epochs = 5;
  int64_t max_iters = 0;  // 0: no limit beyond epochs
  int batch = 64;
  double lr = 0.01;
  LrPolicy lr_policy = LrPolicy::kPoly;  // graphs/lr_schedule.hpp
  double lr_gamma = 0.1;                 // step: factor per step
  int64_t lr_step = 0;                   // step: iterations per step (0: one epoch)
  double lr_power = 1.0;                 // poly: exponent
  // multistep: where the rate is multiplied by lr_gamma, as fractions of the training's
  // iterations, increasing, each in (0, 1)
  std::vector<double> lr_milestones = {0.6, 0.85};
  int64_t lr_warmup = 0;         // iterations of linear warmup (any policy); 0: none
  double lr_warmup_start = 0.1;  // the warmup's first factor, in (0, 1]
  // The optimizer (graphs/sgd.hpp): SGD with `momentum`, or Adam / AdamW with `beta1`,
  // `beta2` and `eps`; `weight_decay` is L2 through the gradient for SGD and Adam, decoupled
  // (on the weight) for AdamW.
  Optimizer optimizer = Optimizer::kSgd;
  double momentum = 0.9;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  // > 0: gradients clipped to this global norm before each update (PyTorch's clip_grad_norm_,
  // graphs/data_parallel.hpp); 0: no clipping.
  double clip_norm = 0;
  double weight_decay = 5e-4;
  int threads = 2;   // compute threads (OpenMP, BLAS, oneDNN), at most kMaxThreads
  int classes = 10;  // the model's outputs; a label outside [0, classes) is an error
  // Input standardization, (pixel / 255 - input_mean) / input_std: Fashion-MNIST's training
  // split has mean 0.2860 and standard deviation 0.3530.
  double input_mean = 0.2860;
  double input_std = 0.3530;
  // Training images flipped left-right at random (idx_data's `mirror`), drawn from the seed.
  bool mirror = false;
  // The data op of training iteration i already serves batch i+1 (and, for a GPU replica, the
  // host-to-GPU copy of iteration i moves batch i+1), so that the model of iteration i+1 starts
  // at once instead of waiting for the batch to be read and copied (train/trainer.cpp). The
  // batches, losses and checkpoints are the same either way; false serves each batch in its run.
  bool prefetch = true;
  // Data parallelism (layout kData) over MPI ranks: `batch` images per rank, gradients reduced
  // by `reduce`. Any other layout needs one rank and one location.
  ParallelLayout parallel = ParallelLayout::kNone;
  int ranks = mpi_world_size();
  int rank = mpi_world_rank();
  // Replicas per rank, each at its own CPU location (rank<R>:cpu0, :cpu1, ...) with its own
  // threads, `batch / locations` images each; the rank's `threads` are shared among them.
  int locations = 1;
  // GPUs instead: one replica per listed device on every rank (rank<R>:gpu<d>), `batch /
  // devices.size()` images each; the data sources stay on the rank's CPU. Empty: train on CPUs.
  std::vector<int> devices;
  // Pipeline (layout kPipeline): the model's layers cut into this many stages, `batch` images
  // through all of them per iteration. One rank: stage s at rank0:cpu<s>, or at the s-th of
  // `devices`; several ranks: as many as stages, stage s at rank s (its CPU, or devices[0]).
  int stages = 1;
  // Interleaved stages: each of the `stages` locations holds this many stages of the model,
  // which is cut into stages * virtual_stages, stage j at location j % stages
  // (graphs/pipeline.hpp): 1F1B's and GPipe's bubble shrinks by this factor, for as many times
  // the copies between locations. `micro_batches` must be a multiple of `stages`.
  int virtual_stages = 1;
  // Model parallelism (layout kModel): these layers (names as the model gives them, e.g. fc1)
  // split alternately by outputs and by inputs over the `locations` (or `devices`) of every
  // rank, rank by rank, `batch` images through all of them per iteration; every other layer
  // runs at the first location. Hybrid (kHybrid): one replica per rank, `batch` images each,
  // gradients reduced by `reduce` as with kData; each replica either split so over its rank's
  // locations, or cut into `stages` stages at them.
  std::vector<std::string> split;
  // Each replica's batch in this many micro-batches, run as copies of the network sharing its
  // weights; their gradients accumulate before one update (any layout; a pipeline overlaps
  // them, stage by stage). Batch norm normalizes each micro-batch by its own statistics and
  // updates the shared running statistics once per micro-batch, in micro-batch order.
  int micro_batches = 1;
  // The order of a pipeline's forward and backward passes over its micro-batches, and of the
  // micro-batches of a replica at one location (a one-stage pipeline: 1F1B runs them one after
  // another, in one micro-batch's memory).
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  // Where the cuts between stages may fall (graphs/pipeline.hpp stage_units): between the parts
  // of a layer (an inception module's branches) too, where that balances the stages better.
  StageCut stage_cut = StageCut::kParts;
  // Task times by name from a --trace of this model (read_trace_times in train/simulation.hpp):
  // the stages are then cut by the layers' traced times instead of their roofline estimates
  // (graphs/pipeline.hpp measure_layers). `stage_trace` names the file in messages.
  std::map<std::string, double> stage_seconds;
  std::string stage_trace;
  Reduction reduce = Reduction::kRing;
  // Gradients smaller than this are fused into buckets of up to this size, each reduced once
  // (graphs/internal/buckets.hpp); 0 reduces every gradient alone.
  int64_t bucket_kb = 256;
  // How the ring reduction moves chunks above the one-step exchange's range
  // (graphs/allreduce.hpp); the same bits every way.
  RingSteps ring_steps = RingSteps::kDirect;
  // Each rank's machine (any ids), for RingSteps::kMachines: purine train finds them at
  // start-up (mpi_machine_of_ranks()), purine simulate from its cluster's placement.
  std::vector<int> machine_of_rank;
  // Batch norm over several replicas (data parallel, hybrid) normalizes by the statistics of
  // every replica's batch together, so that N replicas at batch b follow one at batch N*b
  // (synchronized batch norm, graphs/data_parallel.hpp); false: by each replica's own batch.
  bool sync_bn = true;
  std::chrono::milliseconds stall_timeout{60000};
  // The arithmetic of GPU convolutions and inner products (operators/gpu_kernel.hpp): FP32, or
  // TF32 on the tensor cores. Set process-wide when a Trainer is made.
  GpuMath math = GpuMath::kFp32;
  // Convolutions keep run-to-run bit identity (operators/kernel_determinism.hpp); off, they may
  // use faster kernels whose sums vary in order. Set process-wide when a Trainer is made.
  bool deterministic = true;
  // At a GPU: after two iterations launched op by op, the GPU work of an iteration is recorded
  // as a CUDA graph (two: the weights and batches alternate between two buffers) and each later
  // iteration launches it with one call (RunOptions::device_graphs), with the same results bit
  // for bit. Refused with a reason (the run goes on op by op) for several GPUs or ranks and for
  // GPU ops that draw random numbers. A trace then shows one task per iteration for the graph.
  bool cuda_graph = true;
  // With CUDA graphs at one GPU: the host launches iteration i+1's graph while the GPU still runs
  // iteration i's (RunOptions::run_ahead), so the GPU waits for no host work between iterations;
  // each iteration's loss and divergence check then come one iteration late (the progress line
  // too), and a divergence's blame names blobs of the iteration after. The same results.
  bool run_ahead = false;
  // Each replica's forward graph has its conv + bias + relu chains fused into one op
  // (graphs/fusion.hpp: oneDNN post-ops on the CPU, cuDNN's fused forward on a GPU), and its
  // other bias + relu pairs (after an inner product) into one bias_relu op, where nothing else
  // reads their intermediate blobs; at a GPU, the weights' updates are one op (one kernel) per
  // set of optimizer attributes. The same floats, names and checkpoints. False keeps every op
  // (to compare, or to trace each one).
  bool fuse = true;
  // With fuse, convolutions that read the same input with the same geometry, each with its bias
  // and ReLU (GoogLeNet's 1x1 and reduce branches), run as one op over all their output channels
  // (graphs/fusion.hpp). Not the same floats, close: their input's gradient is summed in one
  // pass over all those channels, and the wider GEMMs may round otherwise. False keeps them
  // apart, with the same floats as unfused ops.
  bool fuse_siblings = true;
  // At CPU locations, activations between oneDNN's convolutions, batch norms and element-wise
  // ops are held in the channel blocks those convolutions compute in, so that no convolution
  // reorders them on every run (graphs/channel_blocks.hpp). The same floats; false keeps every
  // tensor plain.
  bool block_channels = true;
  // Blobs never needed at the same time share memory (purine/internal/memory_plan.hpp): a
  // pipeline under 1F1B then holds the activations of at most S micro-batches per stage. Off,
  // every blob keeps its own (its values stay readable after a run, for debugging).
  bool reuse_memory = true;
  uint64_t seed = 1;
  dispatch::Mode mode = dispatch::Mode::kParallel;
  int test_batch = 100;
  int64_t test_samples = 0;  // 0: the whole test split
  bool evaluate = true;
  // With `evaluate`, also during training: every `test_every` iterations of the whole training
  // (a resumed run keeps the schedule), or kTestEveryEpoch: at the end of every epoch; 0: only
  // when training ends (which always evaluates, once).
  int64_t test_every = kTestEveryEpoch;
  // When set, every task of the training runs is traced there as Chrome-trace JSON (open it in
  // ui.perfetto.dev), streamed after each iteration and completed when training ends or fails.
  std::string trace_path;
  // Checkpoints (purine/serialize.hpp), saved during training into `checkpoint_dir`
  // (train/checkpoint_dir.hpp) every `checkpoint_every` iterations (0: none before the end)
  // and when training ends, keeping the newest `keep`; and/or into the file `checkpoint_path`
  // when training ends. Both are written before the trace and the evaluation, so that their
  // failures lose no training; every output path is checked before training starts.
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;
  int keep = 3;
  std::string checkpoint_path;
  // Where Trainer::resume() continues from: the file `resume_from`, or with `resume` the newest
  // complete checkpoint in `checkpoint_dir`, or else the file `checkpoint_path`.
  bool resume = false;
  std::string resume_from;
};

// More compute threads than any machine here has cores only thrash (and a huge count exhausts
// the process's threads).
constexpr int kMaxThreads = 1024;

// The compute threads when none are given (--threads=0): one per physical core this process may
// run on (its CPU affinity, as mpirun's binding or taskset set it), those cores shared evenly
// among the ranks of an unbound job on this machine (Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE); at
// least 1, at most kMaxThreads. Results do not depend on it (any thread count, the same bits).
int automatic_threads();

// What to say when the compute threads outnumber the CPUs this process may run on (its
// affinity, as mpirun's binding or taskset set it), or, with several ranks of an unbound job on
// this machine (Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE), when all their threads together do:
// the threads then take turns, many times slower than fewer would run. The text names the
// counts and the flag to give; empty when the threads fit or the CPUs cannot be known.
std::string threads_warning(const TrainOptions& options);

// Throws purine::Error naming the first option out of its range or at odds with another, its
// value and what is expected. Touches no file: the trainer checks its output paths itself.
void validate_options(const TrainOptions& options);

// The choices by the names users type. parse_*() throws purine::Error naming the unknown name,
// the option (as a flag) and the valid names; name_of() gives the name back.
Reduction parse_reduction(const std::string& name);  // --reduce: ring, ps, mpi
LrPolicy parse_lr_policy(
    const std::string& name);  // --lr-policy: fixed, step, multistep, poly, cosine
ParallelLayout parse_parallel_layout(const std::string& name);  // --parallel: none, data, pipeline
dispatch::Mode parse_executor(const std::string& name);         // --executor: parallel, serial
PipelineSchedule parse_schedule(const std::string& name);       // --schedule: gpipe, 1f1b, zbh1
StageCut parse_stage_cut(const std::string& name);              // --stage-cut: parts, layers
Optimizer parse_optimizer(const std::string& name);             // --optimizer: sgd, adam, adamw
GpuMath parse_math(const std::string& name);                    // --math: fp32, tf32, exact
// --ring-steps: direct, ring, machines, or auto (std::nullopt: chosen by the ranks' machines,
// train/ring_steps.hpp).
std::optional<RingSteps> parse_ring_steps(const std::string& name);
// "0.6,0.85" -> {0.6, 0.85}; throws purine::Error naming `flag` and the piece that is not a
// finite number. An empty text gives an empty list.
std::vector<double> parse_number_list(const std::string& text, const char* flag);
// Names separated by commas ("fc1,fc2"); an empty name is an error naming `flag`.
std::vector<std::string> parse_name_list(const std::string& text, const char* flag);
// "0,1" -> {0, 1}: GPU ordinals (--devices); throws purine::Error naming `flag` and the piece
// that is not a non-negative integer.
std::vector<int> parse_device_list(const std::string& text, const char* flag);
// Synthetic data instead of a data set: --data=synthetic:CxHxW:CLASSES (e.g. 3x224x224:1000).
struct SyntheticData {
  int64_t channels = 0, rows = 0, cols = 0, classes = 0;
};
// True when `data` names synthetic data, which it then parses into `spec`; throws purine::Error
// naming the flag and the expected form when it starts with "synthetic:" but is malformed.
bool parse_synthetic_data(const std::string& data, SyntheticData* spec);
// The replicas each rank trains: one per device, else one per CPU location.
int replicas_per_rank(const TrainOptions& options);

const char* name_of(Reduction reduction);
const char* name_of(LrPolicy policy);
const char* name_of(ParallelLayout layout);
const char* name_of(dispatch::Mode mode);
const char* name_of(PipelineSchedule schedule);
const char* name_of(StageCut cut);
const char* name_of(Optimizer optimizer);
const char* name_of(GpuMath math);
const char* name_of(RingSteps steps);

}  // namespace purine
