#include "tools/cli/train_command.hpp"

#include <gflags/gflags.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include "base/error.hpp"
#include "graphs/allreduce.hpp"
#include "graphs/pipeline.hpp"
#include "purine/durable_file.hpp"
#include "purine/mpi.hpp"
#include "purine/serialize.hpp"
#include "tools/cli/config.hpp"
#include "tools/cli/metrics_file.hpp"
#include "tools/cli/progress_format.hpp"
#include "tools/cli/startup_errors.hpp"
#include "tools/cli/summary.hpp"
#include "train/options.hpp"
#include "train/ring_steps.hpp"
#include "train/simulation.hpp"
#include "train/trainer.hpp"

DEFINE_string(config, "",
              "read the configuration from this protobuf text file (TrainConfig: fields named as "
              "these flags, e.g. max_iters: 100); flags on the command line override it. Every "
              "flag but --config and --print-config is a field (a file names no other config "
              "file; printing is an action, not a setting of the run)");
DEFINE_bool(print_config, false,
            "print the effective configuration as protobuf text, every flag but --config and "
            "--print-config as a field, and exit");
DEFINE_string(model, "convnet_bn", "model to train (purine models lists them)");
DEFINE_string(data, "/usr/share/datasets/fashion-mnist",
              "directory with the IDX files, or synthetic:CxHxW:CLASSES for random images drawn "
              "from --seed (benchmarks; e.g. synthetic:3x224x224:1000)");
DEFINE_int32(epochs, 5, "passes over the training set");
DEFINE_int64(max_iters, 0, "stop after this many iterations (0: no limit)");
DEFINE_int32(batch, 64,
             "images per iteration: per rank with --parallel=data or hybrid (split evenly over "
             "--locations), the whole batch through a pipeline or a split model");
DEFINE_double(lr, 0.01, "base learning rate");
DEFINE_string(lr_policy, "poly",
              "learning-rate schedule: fixed, step, multistep, poly (linear decay to 0) or cosine");
DEFINE_double(lr_gamma, 0.1, "step policy: factor per step");
DEFINE_int64(lr_step, 0, "step policy: iterations per step (0: one epoch)");
DEFINE_double(lr_power, 1.0, "poly policy: exponent");
DEFINE_string(lr_milestones, "0.6,0.85",
              "multistep policy: where the rate is multiplied by --lr-gamma, as comma-separated "
              "fractions of the training");
DEFINE_int64(lr_warmup, 0, "iterations of linear learning-rate warmup (0: none)");
DEFINE_double(lr_warmup_start, 0.1, "the warmup's first learning-rate factor, in (0, 1]");
DEFINE_string(optimizer, "sgd",
              "sgd (with --momentum), adam or adamw (with --beta1, --beta2, --eps); "
              "--weight-decay is decoupled for adamw");
DEFINE_double(momentum, 0.9, "SGD momentum");
DEFINE_double(beta1, 0.9, "Adam: decay of the first moment");
DEFINE_double(beta2, 0.999, "Adam: decay of the second moment");
DEFINE_double(eps, 1e-8, "Adam: added to the second moment's root");
DEFINE_double(clip_norm, 0,
              "clip the gradients to this global norm before each update, as PyTorch's "
              "clip_grad_norm_ (0: no clipping)");
DEFINE_double(weight_decay, 5e-4, "L2 weight decay");
DEFINE_int32(threads, 0,
             "compute threads (bounds BLAS and oneDNN too), 1 to 1024; 0: one per physical core "
             "this process may run on (its CPU affinity), shared among the unbound MPI ranks of "
             "its machine");
DEFINE_int32(classes, 10,
             "classes of the model's output; a label outside [0, classes) is an error");
DEFINE_double(input_mean, 0.2860,
              "inputs are (pixel / 255 - mean) / std (default: Fashion-MNIST's training split)");
DEFINE_double(input_std, 0.3530, "see --input-mean");
DEFINE_bool(mirror, false,
            "flip each training image left-right with probability 1/2, afresh every epoch");
DEFINE_bool(prefetch, true,
            "read (and copy to the GPU) the next batch while the current one trains; "
            "--noprefetch serves each batch in its own iteration (the same batches and losses)");
DEFINE_uint64(seed, 1, "random seed (initialization, shuffling, dropout)");
DEFINE_string(summary, "", "write a JSON summary of the run to this file");
DEFINE_string(executor, "parallel", "dispatcher: parallel or serial");
DEFINE_string(trace, "", "write a Chrome-trace JSON of the training runs to this file");
DEFINE_string(checkpoint_dir, "",
              "save checkpoints into this directory (created if missing) every --checkpoint-every "
              "iterations, when training ends and when SIGINT or SIGTERM stops it, as "
              "ckpt-<iteration>.purine with the iteration in 10 digits (zeros in front)");
DEFINE_int64(checkpoint_every, 0,
             "with --checkpoint-dir: iterations between checkpoints (0: only when training ends)");
DEFINE_int32(keep, 3, "with --checkpoint-dir: how many of the newest checkpoints to keep");
DEFINE_string(checkpoint, "",
              "save parameters, optimizer state, generators and the iteration count into this "
              "file when training ends or SIGINT or SIGTERM stops it (one file, whatever the "
              "number of ranks)");
DEFINE_bool(resume, false,
            "continue from the newest complete checkpoint in --checkpoint-dir, or else from the "
            "--checkpoint FILE");
DEFINE_string(resume_from, "",
              "continue from this checkpoint file (saved by a run of the same model in any "
              "parallel layout): its weights, optimizer state, data position and iteration count");
DEFINE_string(export_graph, "",
              "write the training graph here (.dot: GraphViz, .pbtxt: protobuf text, else binary)");
DEFINE_bool(evaluate, true,
            "measure test accuracy during training (--test-every) and after it (--noevaluate "
            "skips both)");
DEFINE_string(parallel, "none",
              "none: one process; data: data parallel over the MPI ranks (launch with mpirun) "
              "and the --locations of each; pipeline: the model's layers cut into --stages "
              "stages, one per CPU location, per --devices GPU, or per MPI rank; model: the "
              "--split layers split over the --locations (or --devices) of every MPI rank; hybrid: "
              "data parallel over the MPI ranks, each rank's replica split by --split over its "
              "--locations, or cut into --stages stages at them");
DEFINE_int32(
    stages, 1,
    "pipeline: stages (consecutive layers, cut so that their estimated work is even); with "
    "several MPI ranks, one per rank");
DEFINE_int32(virtual_stages, 1,
             "pipeline: stages per location, interleaved: the model cut into --stages times "
             "this many stages, stage j at location j mod --stages, so that a micro-batch goes "
             "round the locations this many times and the schedule's bubble shrinks as much, "
             "for as many more copies between them (--micro-batches a multiple of --stages "
             "under gpipe and 1f1b; zbh1 takes any)");
DEFINE_string(split, "",
              "model parallel: the layers to split, comma-separated, each optionally with its "
              "axis (conv1:batch, fc1:outputs, fc2:inputs); the others alternately by outputs "
              "and by inputs: two in a row with an activation between them exchange one sum "
              "per pass");
DEFINE_int32(micro_batches, 1,
             "cut each replica's batch into this many micro-batches, their gradients summed "
             "before one update (a pipeline overlaps them stage by stage)");
DEFINE_string(schedule, "1f1b",
              "order of the passes over --micro-batches (at each pipeline stage, or at a "
              "replica's one location): gpipe (all forwards, then all backwards), 1f1b (one "
              "forward, one backward in turn: at most --stages micro-batches in flight and in "
              "memory) or zbh1 (1f1b with weight gradients delayed into the cool-down)");
DEFINE_string(stage_cut, "parts",
              "pipeline: where the cuts between --stages may fall: parts (between the parts of "
              "a layer too, as an inception module's branches, where they balance the stages' "
              "estimated work best; the gradient of a tensor read on both sides of such a cut "
              "adds up in another order, the same within rounding) or layers (between whole "
              "layers only)");
DEFINE_string(stage_trace, "",
              "pipeline: cut the stages by the layers' times in this --trace of a run of the "
              "model (any layout; the medians over its iterations) instead of their roofline "
              "estimates");
DEFINE_int32(locations, 1,
             "data parallel: replicas in each process, each at its own CPU location with its own "
             "threads (--threads is shared among them); model parallel: the CPU locations of "
             "each process the --split layers are split over");
DEFINE_int32(device, -1, "train on this GPU (`purine devices` lists them); -1: on the CPU");
DEFINE_string(math, "fp32",
              "arithmetic of GPU convolutions and inner products: fp32 (float32, with cuDNN's "
              "Winograd convolutions where faster, as PyTorch; the default), exact (no "
              "Winograd: the CPU's results to float rounding, slower) or tf32 "
              "(operands rounded to TF32 on the tensor cores: faster, about 1e-3 from fp32; "
              "PyTorch's allow_tf32)");
DEFINE_bool(deterministic, true,
            "convolutions give the same bits on every run; --nodeterministic lets them use "
            "faster kernels whose sums vary in order (cuDNN's atomics on a GPU, one oneDNN "
            "primitive over all threads for the CPU's weight gradient)");
DEFINE_bool(cuda_graph, true,
            "at a GPU: after two iterations launched op by op, record an iteration's GPU work "
            "as CUDA graphs and launch each later iteration with one call (the same results; "
            "refused, with the reason, for several GPUs or ranks and for dropout); "
            "--nocuda-graph launches op by op (a --trace then times each op)");
DEFINE_bool(run_ahead, false,
            "with CUDA graphs at one GPU: launch each iteration's graph while the GPU still runs "
            "the one before, so that it never waits for the host between iterations (the same "
            "results; the progress line and the divergence check come one iteration late; off "
            "under --trace)");
DEFINE_bool(fuse, true,
            "run each convolution followed by its bias and a ReLU as one op (oneDNN post-ops on "
            "the CPU, cuDNN's fused forward on a GPU), a batch norm or any other bias followed "
            "by a ReLU as one op, at a CPU a residual sum followed by a ReLU as one sum_relu op "
            "(and the gradients gathered into its output as part of its relu_grad), and at a "
            "GPU the weights' updates as one op (the same results); --nofuse keeps every op");
DEFINE_bool(fuse_siblings, true,
            "with --fuse, at a CPU: run convolutions that read the same input with the same "
            "geometry (GoogLeNet's 1x1 and reduce branches) as one op over all their output "
            "channels (the results then round differently); --nofuse_siblings keeps "
            "them apart, with the same results as --nofuse");
DEFINE_bool(block_channels, true,
            "at a CPU: hold the activations between convolutions, batch norms and element-wise "
            "ops in the channel blocks of oneDNN's convolutions (no reorders on every run; the "
            "same results); --noblock_channels keeps every tensor plain");
DEFINE_string(devices, "",
              "data parallel over these GPUs of each process (e.g. 0,1), one replica each with "
              "--batch split among them; the data is read on the CPU");
DEFINE_string(reduce, "ring",
              "data parallel gradient reduction: ring, ps, mpi or nccl (between GPUs, one per "
              "rank)");
DEFINE_int64(bucket_kb, 256,
             "data parallel: fuse gradients smaller than this many KiB into buckets of up to "
             "this size, each reduced at once (0: reduce every gradient alone)");
DEFINE_string(ring_steps, "auto",
              "ring reduction above the one-step exchange's range: direct (each chunk sent "
              "straight to the rank that sums it, each sum straight to every rank: 2 message "
              "latencies), ring (N-1 steps around the ring each way), machines (direct steps "
              "inside a machine, the ring's between machines), or auto: machines where they put "
              "fewer bytes on the busiest machine's network link (ranks on several machines, "
              "several on a machine), else direct; the same bits every way");
DEFINE_bool(sync_bn, true,
            "data parallel and hybrid: batch norm normalizes by the statistics of every "
            "replica's batch together (synchronized batch norm), so N replicas at batch b follow "
            "one at batch N*b; --nosync-bn: by each replica's own batch");
DEFINE_bool(reuse_memory, true,
            "let blobs never needed at the same time share memory (1F1B then holds at most "
            "S micro-batches' activations per stage); --noreuse-memory gives every blob its own");
DEFINE_int32(stall_timeout, 60, "seconds without progress before a run is declared stalled");
DEFINE_int64(test_samples, 0, "evaluate on the first N test images (0: all)");
DEFINE_int64(test_every, -1,
             "also evaluate during training, every N iterations (-1: at the end of every epoch; "
             "0: only when training ends)");
DEFINE_string(metrics, "",
              "write one JSON line per iteration (loss, lr, img/s) and per evaluation (test "
              "accuracy) to this file as training goes; a resumed run appends");

namespace purine::cli {

namespace {

// The trainer that SIGINT and SIGTERM ask to stop, while its train() runs.
std::atomic<Trainer*> trainer_to_stop{nullptr};
static_assert(std::atomic<Trainer*>::is_always_lock_free, "read by a signal handler");

extern "C" void on_stop_signal(int signal) {
  // SA_RESETHAND gave this signal its default action back: a second one, or the other of the
  // two, ends the process at once.
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  sigaction(signal == SIGINT ? SIGTERM : SIGINT, &default_action, nullptr);
  if (Trainer* trainer = trainer_to_stop.load()) trainer->request_stop(signal);
}

// While it lives, the first SIGINT or SIGTERM makes `trainer` finish its iteration, save its
// checkpoints and return from train() (Trainer::request_stop); a second ends the process. A
// signal the shell ignores (a background job's SIGINT) stays ignored.
class StopOnSignals {
 public:
  explicit StopOnSignals(Trainer* trainer) {
    trainer_to_stop.store(trainer);
    struct sigaction action = {};
    action.sa_handler = on_stop_signal;
    action.sa_flags = SA_RESTART | SA_RESETHAND;
    sigemptyset(&action.sa_mask);
    for (int i = 0; i < 2; ++i) {
      sigaction(kSignals[i], nullptr, &previous_[i]);
      if (previous_[i].sa_handler != SIG_IGN) sigaction(kSignals[i], &action, nullptr);
    }
  }
  ~StopOnSignals() {
    for (int i = 0; i < 2; ++i) sigaction(kSignals[i], &previous_[i], nullptr);
    trainer_to_stop.store(nullptr);
  }
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;

 private:
  static constexpr int kSignals[2] = {SIGINT, SIGTERM};
  struct sigaction previous_[2];
};

std::string signal_name(int signal) {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  return signal > 0 ? str("signal ", signal) : "a stop request";
}

// mpirun binds each rank to one core by default (up to two ranks), and taskset or a container
// may allow fewer cores than --threads: the threads then only take turns. Say so instead of
// running slowly without a word (train/options.hpp).
void warn_if_threads_exceed_cores(const TrainOptions& o) {
  const std::string warning = threads_warning(o);
  if (!warning.empty()) std::fprintf(stderr, "warning: %s\n", warning.c_str());
}

}  // namespace

int threads_from_flag() {
  require(FLAGS_threads >= 0 && FLAGS_threads <= kMaxThreads, "--threads must be in [0, ",
          kMaxThreads, "] (0: one per core), got ", FLAGS_threads);
  return FLAGS_threads == 0 ? automatic_threads() : FLAGS_threads;
}

TrainOptions options_from_flags(int ranks) {
  TrainOptions o;
  if (ranks > 0) o.ranks = ranks;
  o.model = FLAGS_model;
  o.data_dir = FLAGS_data;
  o.epochs = FLAGS_epochs;
  o.max_iters = FLAGS_max_iters;
  o.batch = FLAGS_batch;
  o.lr = FLAGS_lr;
  o.lr_policy = parse_lr_policy(FLAGS_lr_policy);
  o.lr_gamma = FLAGS_lr_gamma;
  o.lr_step = FLAGS_lr_step;
  o.lr_power = FLAGS_lr_power;
  o.lr_milestones = parse_number_list(FLAGS_lr_milestones, "--lr-milestones");
  o.lr_warmup = FLAGS_lr_warmup;
  o.lr_warmup_start = FLAGS_lr_warmup_start;
  o.optimizer = parse_optimizer(FLAGS_optimizer);
  o.momentum = FLAGS_momentum;
  o.beta1 = FLAGS_beta1;
  o.beta2 = FLAGS_beta2;
  o.eps = FLAGS_eps;
  o.clip_norm = FLAGS_clip_norm;
  o.weight_decay = FLAGS_weight_decay;
  o.threads = threads_from_flag();
  o.classes = FLAGS_classes;
  o.input_mean = FLAGS_input_mean;
  o.input_std = FLAGS_input_std;
  o.mirror = FLAGS_mirror;
  o.prefetch = FLAGS_prefetch;
  o.seed = FLAGS_seed;
  o.test_samples = FLAGS_test_samples;
  o.trace_path = FLAGS_trace;
  o.evaluate = FLAGS_evaluate;
  o.test_every = FLAGS_test_every;
  o.reduce = parse_reduction(FLAGS_reduce);
  o.bucket_kb = FLAGS_bucket_kb;
  o.ring_steps = parse_ring_steps(FLAGS_ring_steps).value_or(o.ring_steps);
  o.sync_bn = FLAGS_sync_bn;
  o.locations = FLAGS_locations;
  o.stages = FLAGS_stages;
  o.virtual_stages = FLAGS_virtual_stages;
  o.micro_batches = FLAGS_micro_batches;
  o.schedule = parse_schedule(FLAGS_schedule);
  o.stage_cut = parse_stage_cut(FLAGS_stage_cut);
  if (!FLAGS_stage_trace.empty()) {
    o.stage_trace = FLAGS_stage_trace;
    o.stage_seconds = read_trace_times(FLAGS_stage_trace, "--stage-trace").seconds;
  }
  o.math = parse_math(FLAGS_math);
  o.deterministic = FLAGS_deterministic;
  o.cuda_graph = FLAGS_cuda_graph;
  o.run_ahead = FLAGS_run_ahead;
  o.fuse = FLAGS_fuse;
  o.fuse_siblings = FLAGS_fuse_siblings;
  o.block_channels = FLAGS_block_channels;
  o.split = parse_name_list(FLAGS_split, "--split");
  require(FLAGS_device < 0 || FLAGS_devices.empty(), "give --device or --devices, not both");
  o.devices = FLAGS_device >= 0 ? std::vector<int>{FLAGS_device}
                                : parse_device_list(FLAGS_devices, "--devices");
  o.checkpoint_dir = FLAGS_checkpoint_dir;
  o.checkpoint_every = FLAGS_checkpoint_every;
  o.keep = FLAGS_keep;
  o.checkpoint_path = FLAGS_checkpoint;
  o.resume = FLAGS_resume;
  o.resume_from = FLAGS_resume_from;
  o.stall_timeout = std::chrono::seconds(FLAGS_stall_timeout);
  o.reuse_memory = FLAGS_reuse_memory;
  o.parallel = parse_parallel_layout(FLAGS_parallel);
  o.mode = parse_executor(FLAGS_executor);
  // Every check, worded with the flags, is the trainer's (train/options.hpp).
  validate_options(o);
  return o;
}

namespace {

// What the training graph's compile allocated on this rank, in total and per location.
std::string memory_line(const MemoryPlan& memory, bool reuse) {
  auto mb = [](int64_t bytes) { return str(std::lround(bytes / 1e5) / 10.0, " MB"); };
  int64_t allocated = 0, blobs = 0;
  std::string per_location;
  for (const auto& [location, use] : memory.by_location) {
    allocated += use.allocated_bytes;
    blobs += use.blob_bytes;
    per_location += str(per_location.empty() ? "" : ", ", location, " ", mb(use.allocated_bytes));
  }
  return str("memory for activations, gradients and optimizer steps: ", mb(allocated),
             reuse ? str(" (", mb(blobs), " without sharing)") : std::string(" (not shared)"),
             memory.by_location.size() > 1 ? str(": ", per_location) : std::string(), "\n");
}

}  // namespace

bool ring_steps_automatic() { return !parse_ring_steps(FLAGS_ring_steps); }

int run_train() {
  // The config file and the options follow from the command line alone: every rank meets their
  // errors alike, before any communication (startup_errors.hpp), unless the file differs
  // between nodes.
  ConfigFile config;
  TrainOptions options;
  std::string problem;
  try {
    config = apply_config_file(FLAGS_config);
    if (!FLAGS_print_config) options = options_from_flags();
  } catch (const Error& e) {
    problem = config.place(e.what());
  }
  settle_startup(problem);
  if (FLAGS_print_config) {
    if (mpi_world_rank() == 0) std::fputs(effective_config().c_str(), stdout);
    return 0;
  }
  // Every rank is here, none failed: the collective that finds the ranks' machines is safe.
  if (ring_steps_automatic() || options.ring_steps == RingSteps::kMachines) {
    options.machine_of_rank = mpi_machine_of_ranks();
    const RingStepsChoice choice =
        choose_ring_steps(options.machine_of_rank, replicas_per_rank(options));
    if (ring_steps_automatic()) options.ring_steps = choice.steps;
    if (options.rank == 0 && choice.machines > 1 && options.reduce == Reduction::kRing)
      std::printf("ring reduction with --ring-steps=%s (%s%s)\n", name_of(options.ring_steps),
                  ring_steps_automatic() ? "auto: " : "", choice.reason().c_str());
  }
  std::unique_ptr<Trainer> built;
  std::string resumed;
  try {
    warn_if_threads_exceed_cores(options);
    // Fail on an unwritable output path now, not after training (the trainer checks its own).
    if (options.rank == 0 && !FLAGS_summary.empty())
      check_writable(FLAGS_summary, "the summary file");
    if (options.rank == 0 && !FLAGS_export_graph.empty())
      check_writable(FLAGS_export_graph, "the graph export file");
    if (options.rank == 0 && !FLAGS_metrics.empty())
      check_writable(FLAGS_metrics, "the metrics file");
    built = std::make_unique<Trainer>(options);
    resumed = built->resume();
  } catch (const Error& e) {
    // A value the config file gave: name the file, line and field.
    throw Error(config.place(e.what()));
  }
  Trainer& trainer = *built;
  const bool leader = options.rank == 0;
  if (leader && !resumed.empty()) std::printf("resuming from %s\n", resumed.c_str());
  if (leader && !FLAGS_export_graph.empty())
    export_graph(trainer.training_graph(), FLAGS_export_graph);
  // Open MPI gives its ranks a pseudo-terminal even when mpirun's own output goes to a file, so
  // under mpirun progress comes as whole lines.
  const bool terminal = isatty(fileno(stdout)) && std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr;
  if (leader) {
    if (options.parallel == ParallelLayout::kHybrid)
      std::printf(
          "training %s: batch %d x %d rank%s, each rank's replica %s %s over %d "
          "locations",
          options.model.c_str(), options.batch, options.ranks, options.ranks == 1 ? "" : "s",
          options.split.empty() ? "cut into" : "with",
          options.split.empty() ? "stages" : FLAGS_split.c_str(),
          options.split.empty() ? options.stages : options.locations);
    else if (options.parallel == ParallelLayout::kModel)
      std::printf("training %s: batch %d with %s split over %d location%s of %d rank%s",
                  options.model.c_str(), options.batch, FLAGS_split.c_str(), options.locations,
                  options.locations == 1 ? "" : "s", options.ranks, options.ranks == 1 ? "" : "s");
    else if (options.parallel == ParallelLayout::kPipeline)
      std::printf("training %s: batch %d through a pipeline of %s over %d rank%s",
                  options.model.c_str(), options.batch, pipeline_shape(options).c_str(),
                  options.ranks, options.ranks == 1 ? "" : "s");
    else
      std::printf("training %s: batch %d x %d rank%s", options.model.c_str(), options.batch,
                  options.ranks, options.ranks == 1 ? "" : "s");
    if (options.locations > 1 && options.parallel == ParallelLayout::kData)
      std::printf(" (%d locations each)", options.locations);
    for (size_t i = 0; i < options.devices.size(); ++i)
      std::printf("%s%d", i == 0 ? " on GPU " : ",", options.devices[i]);
    std::printf(", %d thread%s, %lld iterations per epoch\n", options.threads,
                options.threads == 1 ? "" : "s",
                static_cast<long long>(trainer.iterations_per_epoch()));
    std::fputs(memory_line(trainer.memory(), options.reuse_memory).c_str(), stdout);
    std::fputs(stages_line(trainer.pipeline_stages()).c_str(), stdout);
    std::fflush(stdout);
  }
  std::unique_ptr<MetricsFile> metrics;
  if (leader && !FLAGS_metrics.empty())
    metrics = std::make_unique<MetricsFile>(FLAGS_metrics, /*append=*/!resumed.empty());
  using Clock = std::chrono::steady_clock;
  const Clock::time_point started = Clock::now();
  ProgressSchedule schedule;
  auto progress = [&](const TrainProgress& p) {
    if (!leader) return;
    if (metrics) metrics->write(p);
    if (p.test_accuracy) {  // an evaluation during training: a line of its own, kept
      std::printf("%siter %lld  epoch %d  test accuracy %.4f\n", terminal ? "\n" : "",
                  static_cast<long long>(p.iteration), p.epoch, *p.test_accuracy);
      std::fflush(stdout);
      return;
    }
    // On a terminal one line rewritten in place; otherwise ProgressSchedule's lines.
    bool last = p.iteration == p.total_iterations;
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    if (!terminal && !schedule.due(p.iteration, last, seconds)) return;
    std::printf("%siter %lld/%lld  epoch %d  loss %.4f  lr %.3g  %s img/s  eta %s%s",
                terminal ? "\r" : "", static_cast<long long>(p.iteration),
                static_cast<long long>(p.total_iterations), p.epoch, p.loss, p.learning_rate,
                format_rate(p.images_per_sec).c_str(), format_eta(p.eta_seconds).c_str(),
                terminal && !last ? "" : "\n");
    std::fflush(stdout);
  };
  // Saves the checkpoints (if asked) before the trace and the evaluation.
  TrainResult result;
  {
    StopOnSignals stop_on_signals(&trainer);
    result = trainer.train(progress);
  }
  if (result.stopped) {
    // The shells' convention: 128 + the signal (130 for SIGINT, 143 for SIGTERM).
    const int status = 128 + (result.stop_signal > 0 ? result.stop_signal : SIGTERM);
    if (!leader) return status;
    std::string where = "no checkpoint written (--checkpoint-dir or --checkpoint keeps it)";
    for (size_t i = 0; i < result.checkpoints.size(); ++i)
      where = str(i == 0 ? "checkpoint written to " : where + " and ", result.checkpoints[i]);
    if (!result.checkpoints.empty()) where += "; resume with --resume";
    std::printf("%sstopped by %s at iteration %lld; %s\n", terminal ? "\n" : "",
                signal_name(result.stop_signal).c_str(), static_cast<long long>(result.iteration),
                where.c_str());
    std::fflush(stdout);
    return status;
  }
  if (!leader) return 0;
  if (metrics && options.evaluate) {  // the evaluation when training ended
    TrainProgress end;
    end.iteration = result.iteration;
    end.epoch = static_cast<int>((result.iteration - 1) / trainer.iterations_per_epoch()) + 1;
    end.test_accuracy = result.test_accuracy;
    metrics->write(end);
  }
  if (options.evaluate) std::printf("test accuracy %.4f  ", result.test_accuracy);
  std::printf("(%lld iterations, %s img/s, %.1f s)\n", static_cast<long long>(result.iterations),
              format_rate(result.images_per_sec).c_str(), result.wall_seconds);
  if (options.cuda_graph && !options.devices.empty())
    std::printf("CUDA graphs %s\n", result.device_graphs.c_str());
  if (result.pipeline) {
    const PipelineTimes& times = *result.pipeline;
    std::printf(
        "%s of %s, %d micro-batches (%s): bubble %.3f (%.3f in theory for equal stages); "
        "stages busy",
        options.parallel == ParallelLayout::kHybrid ? "rank 0's pipeline" : "pipeline",
        pipeline_shape(options).c_str(), options.micro_batches, name_of(options.schedule),
        times.bubble(),
        bubble_theory(options.schedule, options.stages, options.micro_batches,
                      options.virtual_stages));
    for (size_t s = 0; s < times.busy.size(); ++s)
      std::printf("%s%.2f", s == 0 ? " " : " / ", times.span > 0 ? times.busy[s] / times.span : 0);
    std::printf(" of the time; at most %d micro-batches in flight at a stage\n", times.in_flight);
  }
  if (!FLAGS_summary.empty()) write_summary(FLAGS_summary, options, result);
  return 0;
}

}  // namespace purine::cli
