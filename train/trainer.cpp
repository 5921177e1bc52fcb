#include "train/trainer.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "base/error.hpp"
#include "dispatcher/tracer.hpp"
#include "graphs/initialize.hpp"
#include "graphs/lr_schedule.hpp"
#include "operators/kernel_determinism.hpp"
#include "purine/durable_file.hpp"
#include "purine/mpi_bytes.hpp"
#include "purine/runnable.hpp"
#include "purine/serialize.hpp"
#include "train/checkpoint_dir.hpp"
#include "train/training_graph.hpp"

namespace purine {

namespace {

using Clock = std::chrono::steady_clock;

// The value of a scalar blob, at any location.
float scalar(Blob& blob) { return blob.tensor().values().at(0); }

// Which blobs first_non_finite() looks at: the parameters, every op's outputs in graph order
// (what an update computed from: activations, then gradients), or both, parameters first.
enum class Scan { kAll, kParameters, kOpOutputs };

// Names the first blob of this rank holding a NaN or an infinity ("" when there is none), but
// for `overwritten` blobs, whose memory holds another blob's values after a run (the memory
// plan's reuse). It reads every blob it looks at on the host (a GPU's by a blocking copy): the
// trainer calls it only once a cheap check has seen a non-finite value, or before a checkpoint.
std::string first_non_finite(const Graph& g, int rank, const std::set<const Blob*>& overwritten,
                             Scan scan = Scan::kAll) {
  auto bad = [&](Blob* b) {
    if (b->location().rank != rank || b->tensor().count() == 0) return false;
    const auto finite = [](float v) { return std::isfinite(v); };
    if (!b->location().is_cpu()) {
      const std::vector<float> values = b->tensor().values();
      return !std::all_of(values.begin(), values.end(), finite);
    }
    const float* data = b->tensor().data();
    return !std::all_of(data, data + b->tensor().count(), finite);
  };
  if (scan != Scan::kOpOutputs)
    for (const Parameter& p : g.parameters())
      if (bad(p.blob))
        return str("the first non-finite blob is the parameter '", p.blob->name(), "'");
  if (scan == Scan::kParameters) return "";
  for (const auto& op : g.ops())
    for (Blob* b : op->outputs())
      if (!overwritten.count(b) && bad(b))
        return str("the first non-finite blob is '", b->name(), "' (written by '", op->name(),
                   "')");
  return "";
}

// This rank's trace file.
std::string trace_file(const TrainOptions& o) {
  return o.ranks > 1 ? o.trace_path + ".rank" + std::to_string(o.rank) : o.trace_path;
}

// Fails now on an output path that cannot be written, rather than after training.
void check_output_paths(const TrainOptions& o) {
  if (!o.trace_path.empty()) check_writable(trace_file(o), "the trace file");
  if (o.rank != 0) return;  // rank 0 writes the checkpoints
  if (!o.checkpoint_dir.empty()) prepare_checkpoint_dir(o.checkpoint_dir);
  if (!o.checkpoint_path.empty()) check_writable(o.checkpoint_path, "the checkpoint file");
}

// A generator state for `location` from the seed and the iteration, for a checkpoint of another
// layout (FNV-1a over the three).
std::string reseeded_state(uint64_t seed, int64_t iteration, const std::string& location) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
  };
  mix(seed);
  mix(static_cast<uint64_t>(iteration));
  for (char c : location) mix(static_cast<unsigned char>(c));
  return Rng(h).state();
}

}  // namespace

class Trainer::Impl {
 public:
  explicit Impl(TrainOptions options)
      : options_(std::move(options)), train_("train"), test_("test") {
    validate_options(options_);
    set_gpu_math(options_.math);
    set_deterministic_kernels(options_.deterministic);
    const std::vector<Location> locations = replica_locations(options_);
    TrainingGraphParts parts = compose_training_graph(train_, options_, /*every_rank=*/false);
    dp_ = std::move(parts.dp);
    train_feeds_ = std::move(parts.feeds);
    epoch_data_ = parts.epoch_data;
    stages_ = std::move(parts.stages);
    watch_ = std::move(parts.watch);
    leader_loss_ = parts.leader_loss;
    twins_ = std::move(parts.twins);
    const std::set<const Blob*> observed = std::move(parts.observed);
    initialize_parameters(dp_.checkpoint, train_, options_.seed, options_.rank);

    LrScheduleOptions lr;
    lr.policy = options_.lr_policy;
    lr.base_lr = options_.lr;
    lr.gamma = options_.lr_gamma;
    lr.step_size = options_.lr_step > 0 ? options_.lr_step : iterations_per_epoch();
    lr.max_iter = std::max<int64_t>(1, total_iterations());
    lr.power = options_.lr_power;
    if (lr.policy == LrPolicy::kMultistep)
      for (double fraction : options_.lr_milestones)
        lr.milestones.push_back(std::llround(fraction * static_cast<double>(lr.max_iter)));
    lr.warmup_iters = options_.lr_warmup;
    lr.warmup_start_factor = options_.lr_warmup_start;
    schedule_ = std::make_unique<LrSchedule>(lr);

    RunOptions run;
    run.mode = options_.mode;
    run.compute_threads = options_.threads;
    run.seed = options_.seed;
    run.rank = options_.rank;
    run.world_size = options_.ranks;
    run.stall_timeout = options_.stall_timeout;
    run.reuse_memory = options_.reuse_memory;
    run.device_graphs = options_.cuda_graph;
    run.run_ahead = !twins_.empty();
    run.observed = observed;
    train_run_ = std::make_unique<Runnable>(train_, run);
    check_output_paths(options_);
    if (!options_.trace_path.empty()) {
      tracer_ = std::make_unique<dispatch::Tracer>();
      train_run_->add_observer(tracer_.get());
    }
    // A pipeline's stages, or those of this rank's replica in data parallelism over pipelines.
    const bool hybrid = options_.parallel == ParallelLayout::kHybrid;
    if (options_.stages > 1 && (options_.parallel == ParallelLayout::kPipeline || hybrid)) {
      pipeline_meter_ = std::make_unique<PipelineMeter>(
          train_, layout_locations(options_, hybrid ? options_.rank : 0), options_.micro_batches);
      train_run_->add_observer(pipeline_meter_.get());
    }
    // A pipeline or a split model over ranks evaluates on all of them, as it trains.
    const bool evaluating_ranks = (options_.parallel == ParallelLayout::kPipeline ||
                                   options_.parallel == ParallelLayout::kModel) &&
                                  options_.ranks > 1;
    if (options_.evaluate && (options_.rank == 0 || evaluating_ranks)) {
      // Rank 0 evaluates with a single-device graph reading replica 0's tensors, where they are.
      Graph::Scope scope(test_, "replica0");
      Graph::Placement at(test_, locations[0]);
      std::vector<DataFeed> test_feeds;
      test_outputs_ =
          build_network(test_, options_, "test", options_.test_batch, false, 0, 1, &test_feeds);
      if (test_outputs_.accuracy->location().rank == options_.rank)
        test_accuracy_ = host_readable(test_, test_outputs_.accuracy);
      test_data_ = test_feeds[0].source;
      const DataSource& train_data = *epoch_data_;
      require(test_data_->rows() == train_data.rows() && test_data_->cols() == train_data.cols(),
              "the test split in '", options_.data_dir, "' has ", test_data_->rows(), "x",
              test_data_->cols(), " images, the training split ", train_data.rows(), "x",
              train_data.cols(), " (both splits must have one image size)");
      for (const auto* list : {&test_.parameters(), &test_.states()})
        for (const Parameter& p : *list)
          if (p.blob->location().rank == options_.rank)
            p.blob->share_tensor(*train_.blob(p.blob->name()));
      run.observed = {test_outputs_.loss, test_outputs_.accuracy};
      if (test_accuracy_) run.observed.insert(test_accuracy_);
      test_run_ = std::make_unique<Runnable>(test_, run);
    }
  }

  // A run stopped by an error still leaves a complete trace of what ran.
  ~Impl() {
    if (!tracer_ || !tracer_->file_open()) return;
    try {
      tracer_->end_file();
    } catch (const Error& e) {
      LOG(WARNING) << e.what();
    }
  }

  int64_t iterations_per_epoch() const { return epoch_data_->batches_per_epoch(); }
  const std::vector<PipelineStage>& pipeline_stages() const { return stages_; }

  int64_t total_iterations() const {
    int64_t total = options_.epochs > 0 ? options_.epochs * iterations_per_epoch() : 0;
    if (options_.max_iters > 0)
      total = total > 0 ? std::min(total, options_.max_iters) : options_.max_iters;
    return total;
  }

  TrainResult train(const std::function<void(const TrainProgress&)>& progress) {
    TrainResult result;
    const auto start = Clock::now();
    Clock::time_point warm_start = start;
    // A resumed run goes on where its checkpoint stopped, towards the same total.
    require(iterations_done_ == 0 || total_iterations() > iterations_done_,
            "nothing to train: the checkpoint is at iteration ", iterations_done_,
            " and this run's total is ", total_iterations(), " (raise --max-iters or --epochs)");
    refuse_checkpoints_of_another_run();
    const int64_t total = total_iterations() - iterations_done_;
    prime_data();
    const int64_t warmup = std::min<int64_t>(10, total / 2);
    const double images_per_iteration =
        static_cast<double>(options_.batch) *
        (options_.parallel == ParallelLayout::kData || options_.parallel == ParallelLayout::kHybrid
             ? options_.ranks
             : 1);
    const bool leader = options_.rank == 0;
    // Each iteration is reported once its results are checked: with run-ahead one run later.
    const auto report = [&](const CheckedRun& run) {
      if (leader) result.final_loss = run.loss;
      if (!progress) return;
      TrainProgress p;
      p.test_accuracy = run.test_accuracy;
      p.iteration = run.iteration;
      p.total_iterations = total_iterations();
      p.epoch = static_cast<int>((run.iteration - 1) / iterations_per_epoch()) + 1;
      p.loss = run.loss;
      p.learning_rate = run.learning_rate;
      p.images_per_sec = result.images_per_sec;
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      p.eta_seconds = elapsed / result.iterations * (total - result.iterations);
      progress(p);
    };
    checked_ = iterations_done_;
    if (tracer_) tracer_->begin_file(trace_file(options_), options_.rank);
    for (int64_t it = 0; it < total; ++it) {
      const int64_t global_it = iterations_done_;
      const double learning_rate = schedule_->at(global_it);
      dp_.sgd.set_learning_rate(learning_rate, options_.rank);
      dp_.sgd.set_step(global_it + 1, options_.rank);  // Adam's bias correction
      train_run_->run();
      if (tracer_) tracer_->flush_to_file();  // the trace's memory stays one iteration's
      if (pipeline_meter_) {
        const PipelineTimes times = pipeline_meter_->finish_iteration();
        if (it >= warmup) {
          if (!result.pipeline) result.pipeline.emplace();
          result.pipeline->add(times);
        }
      }
      ++iterations_done_;
      result.iterations = it + 1;
      const auto now = Clock::now();
      if (result.iterations == warmup) warm_start = now;
      const double timed = std::chrono::duration<double>(now - warm_start).count();
      const int64_t timed_iters = result.iterations - warmup;
      if (timed_iters > 0 && timed > 0)
        result.images_per_sec = timed_iters * images_per_iteration / timed;
      const bool save_now = options_.checkpoint_every > 0 &&
                            iterations_done_ % options_.checkpoint_every == 0 &&
                            iterations_done_ < total_iterations();
      const bool test_now = test_due();
      check_runs(/*wait=*/save_now || test_now, report);
      if (save_now) save_to_dir();
      // Ranks that do not evaluate wait for rank 0 in agreed_stop()'s collective below, outside
      // any run, where no stall timer runs.
      if (test_now) {
        const auto before = Clock::now();
        const double accuracy = evaluate();
        // images/s counts training only.
        if (result.iterations >= warmup) warm_start += Clock::now() - before;
        result.evaluations.emplace_back(iterations_done_, accuracy);
        report(CheckedRun{iterations_done_, result.final_loss, schedule_->at(iterations_done_ - 1),
                          accuracy});
      }
      const int stop = agreed_stop();
      if (stop != kNoStop) {
        result.stopped = true;
        result.stop_signal = stop;
        break;
      }
    }
    check_runs(/*wait=*/true, report);
    if (result.pipeline && !leader && options_.parallel == ParallelLayout::kHybrid)
      result.pipeline.reset();  // rank 0 reports its replica's pipeline
    if (result.pipeline && options_.ranks > 1 && options_.parallel == ParallelLayout::kPipeline) {
      // Every rank saw its own stage.
      const std::vector<std::string> parts = mpi_gather_bytes(result.pipeline->serialize(), 0);
      if (leader) {
        result.pipeline = PipelineTimes{};
        for (const std::string& part : parts) result.pipeline->merge(PipelineTimes::parse(part));
      } else {
        result.pipeline.reset();
      }
    }
    result.blame_scans = blame_scans_;
    result.device_graphs = train_run_->device_graphs_state();
    result.replayed_iterations = train_run_->replayed_runs();
    // The training is kept before anything else may fail.
    result.iteration = iterations_done_;
    if (!options_.checkpoint_dir.empty()) result.checkpoints.push_back(save_to_dir());
    if (!options_.checkpoint_path.empty()) {
      save(options_.checkpoint_path);
      result.checkpoints.push_back(options_.checkpoint_path);
    }
    if (tracer_) tracer_->end_file();
    if (test_run_ && !result.stopped) result.test_accuracy = evaluate();
    result.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return result;
  }

  // Before the first run: the blobs that this rank's prefetching data ops' networks read
  // (DataFeed) get the batches the first run trains on, and the data ops' cursors move past
  // them, as the runs before would have. The data op serves them here, on the caller's thread
  // (no run is in progress, so its thread is idle), into the current host blobs; at a GPU the
  // first batch goes on by one blocking copy (the only one: the runs' copies are on the
  // device's stream) and the host blobs then get the second. After load()'s skip_to, so that a
  // resumed run starts at its checkpoint's batch.
  void prime_data() {
    if (data_primed_) return;
    data_primed_ = true;
    for (DataFeed& feed : train_feeds_) {
      if (!feed.prefetched()) continue;
      const auto serve = [&] {
        std::vector<Tensor*> batch;
        for (Blob* b : feed.host) batch.push_back(&b->tensor());
        OpContext context;
        feed.op->kernel().compute({}, batch, context);
      };
      serve();
      if (feed.device.empty()) continue;
      for (size_t i = 0; i < feed.device.size(); ++i)
        feed.device[i]->tensor().copy_from(feed.host[i]->tensor());
      serve();
    }
  }

  // An iteration whose results were checked (check_runs), for the progress report.
  struct CheckedRun {
    int64_t iteration;
    double loss;  // the leader's loss (NaN on other ranks)
    double learning_rate;
    std::optional<double> test_accuracy = {};  // after an evaluation during training
  };
  // Whether training evaluates now, after iterations_done_ (TrainOptions::test_every), on a rank
  // that evaluates; the end of training evaluates anyway.
  bool test_due() const {
    if (!test_run_ || iterations_done_ >= total_iterations()) return false;
    const int64_t every =
        options_.test_every == kTestEveryEpoch ? iterations_per_epoch() : options_.test_every;
    return every > 0 && iterations_done_ % every == 0;
  }

  // Checks, oldest first, each run whose results are final and not yet checked, and passes it
  // to `report`: the run just synced; with run-ahead (twins_) the one before it, and the last one
  // too once it has run (at once with `wait`, which waits for it: before a checkpoint, at the
  // end).
  template <typename Report>
  void check_runs(bool wait, const Report& report) {
    const auto check = [&](int64_t iteration, bool from_twins) {
      check_converging(iteration, from_twins);
      checked_ = iteration;
      report(CheckedRun{iteration,
                        leader_loss_ ? value_of(*leader_loss_, from_twins)
                                     : std::numeric_limits<double>::quiet_NaN(),
                        schedule_->at(iteration - 1)});
    };
    if (twins_.empty()) {
      if (checked_ < iterations_done_) check(iterations_done_, false);
      return;
    }
    // After run k's sync the run before it has run, its values back in the blobs (two swaps).
    if (checked_ < iterations_done_ - 1) check(iterations_done_ - 1, false);
    if (wait) train_run_->drain();
    if (checked_ < iterations_done_ && !train_run_->run_in_flight()) check(iterations_done_, true);
  }
  // A host-readable scalar after a run: with run-ahead, the last run's is in the blob's twin.
  float value_of(Blob& blob, bool from_twin) const {
    return scalar(from_twin ? *twins_.at(&blob) : blob);
  }

  // Stops training, before any checkpoint of the broken weights, at the first iteration whose
  // loss is not finite on one of this rank's replicas, or whose update made a weight of this
  // rank non-finite (a non-finite gradient, or an overflowing step, with a loss still finite).
  // Each iteration reads one float per replica and per location, written by the run itself;
  // only a non-finite one makes it look for the blob to blame.
  void check_converging(int64_t iteration, bool from_twins) {
    for (const auto& [r, loss_blob] : watch_.replica_losses) {
      const float loss = value_of(*loss_blob, from_twins);
      if (std::isfinite(loss)) continue;
      throw Error(str("training diverged at iteration ", iteration, ": the loss of replica ", r,
                      " is ", loss, "; ", blame(Scan::kAll), " (lower --lr, or check the data)"));
    }
    for (const auto& [location, count] : watch_.non_finite_weights) {
      const float bad = value_of(*count, from_twins);
      if (bad == 0) continue;
      std::string weight = blame(Scan::kParameters);
      if (weight.empty()) weight = str(bad, " weights at ", location, " are not finite");
      std::string cause = blame(Scan::kOpOutputs);
      if (cause.empty()) cause = "every gradient was finite: the step itself overflowed";
      throw Error(str("training diverged at iteration ", iteration,
                      ": its update made a weight non-finite (", weight, "); before the update, ",
                      cause, " (lower --lr, or check the data)"));
    }
  }
  // first_non_finite() over this rank's blobs, counted.
  std::string blame(Scan scan) {
    train_run_->drain();  // with run-ahead: the blobs as the run after left them
    ++blame_scans_;
    return first_non_finite(train_, options_.rank, overwritten(), scan);
  }

  // Every setting that decides which state tensors each location holds, and so whether the
  // random generators of a checkpoint carry over.
  std::string layout() const {
    std::string layout = str("ranks=", options_.ranks, " locations=", options_.locations);
    for (size_t i = 0; i < options_.devices.size(); ++i)
      layout += str(i ? "," : " devices=", options_.devices[i]);
    if (options_.ranks * replicas_per_rank(options_) > 1)
      layout += str(" reduce=", name_of(options_.reduce), " bucket_kb=", options_.bucket_kb);
    if (options_.stages > 1) layout += str(" stages=", options_.stages);
    if (options_.micro_batches > 1) layout += str(" micro_batches=", options_.micro_batches);
    for (size_t i = 0; i < options_.split.size(); ++i)
      layout += str(i ? "," : " split=", options_.split[i]);
    return layout;
  }
  CheckpointRanks ranks() const { return {options_.rank, options_.ranks}; }
  const std::set<const Blob*>& overwritten() const { return train_run_->memory().overwritten; }
  void save(const std::string& path) const {
    check_weights_finite();
    CheckpointInfo info;
    info.model = options_.model;
    info.iteration = iterations_done_;
    info.ranks = options_.ranks;
    info.layout = layout();
    info.rng_states = train_run_->rng_states();
    purine::save_checkpoint(dp_.checkpoint, path, info, ranks());
  }
  // A checkpoint never keeps broken weights: an update may make them non-finite while the loss
  // that preceded it still was.
  void check_weights_finite() const {
    // Parameters only: every rank holds the same weights, so all ranks agree before the
    // collective save.
    const std::string bad =
        first_non_finite(train_, options_.rank, overwritten(), Scan::kParameters);
    require(bad.empty(), "training diverged at iteration ", iterations_done_, ": ", bad,
            " (lower --lr, or check the data); no checkpoint written");
  }
  // Saves into the checkpoint directory; returns the file's path.
  std::string save_to_dir() {
    const std::string path = checkpoint_file(options_.checkpoint_dir, iterations_done_);
    if (saved_to_dir_ == iterations_done_) return path;  // a stop right after a periodic save
    save(path);
    saved_to_dir_ = iterations_done_;
    if (options_.rank == 0) prune_checkpoints(options_.checkpoint_dir, options_.keep);
    return path;
  }

  static constexpr int kNoStop = -1;
  void request_stop(int signal) { stop_.store(signal < 0 ? 0 : signal, std::memory_order_relaxed); }
  // The stop request every rank acts on after this iteration: this rank's with one rank (one
  // load); with several, the first rank's that asked (a gather to rank 0 and a broadcast, so
  // that every rank stops after the same iteration and saves the collective checkpoint), or
  // kNoStop.
  int agreed_stop() {
    const int mine = stop_.load(std::memory_order_relaxed);
    if (options_.ranks == 1) return mine;
    std::string agreed = std::to_string(mine);
    for (const std::string& part : mpi_gather_bytes(agreed, 0))
      if (std::stoi(part) != kNoStop) {
        agreed = part;
        break;
      }
    return std::stoi(mpi_broadcast_bytes(agreed, 0));
  }
  void load(const std::string& path) {
    require(iterations_done_ == 0, "load a checkpoint before training, not after");
    const std::map<std::string, std::string> generators = train_run_->rng_states();
    CheckpointExpectation expected;
    expected.model = options_.model;
    expected.iteration_below = total_iterations();
    expected.layout = layout();
    for (const auto& [location, state] : generators) expected.generators.push_back(location);
    expected.ranks = ranks();
    const CheckpointInfo info = purine::load_checkpoint(dp_.checkpoint, path, expected);
    iterations_done_ = info.iteration;
    std::map<std::string, std::string> states;
    for (const auto& [location, state] : generators)
      states[location] = info.layout == layout()
                             ? info.rng_states.at(location)
                             : reseeded_state(options_.seed, iterations_done_, location);
    train_run_->set_rng_states(states);
    // The data continue with the batch after the last one trained on.
    for (DataFeed& feed : train_feeds_) feed.source->skip_to(iterations_done_);
  }
  // What `decide` returns on rank 0, on every rank; its error is every rank's error, so none
  // waits for a rank that failed.
  std::string decided_on_rank0(const std::function<std::string()>& decide) const {
    std::string choice;  // "P" + the answer, or "E" + the error
    if (options_.rank == 0) {
      try {
        choice = "P" + decide();
      } catch (const Error& e) {
        choice = std::string("E") + e.what();
      }
    }
    if (options_.ranks > 1) choice = mpi_broadcast_bytes(choice, 0);
    require(choice[0] == 'P', choice.substr(1));
    return choice.substr(1);
  }
  // A run from the start into a directory of another run's checkpoints would overwrite some,
  // prune others and leave --resume to pick one of that run's: refused before it trains.
  void refuse_checkpoints_of_another_run() const {
    if (iterations_done_ != 0 || options_.checkpoint_dir.empty()) return;
    // Damaged files alone (skipped with a warning, as --resume skips them) do not count.
    const std::string newest = decided_on_rank0([&] {
      return newest_checkpoint(options_.checkpoint_dir, checkpoint_size_limit(dp_.checkpoint));
    });
    require(newest.empty(), "--checkpoint-dir '", options_.checkpoint_dir,
            "' already holds the checkpoints of a run (the newest: ", newest,
            "), which this run from the start would overwrite and prune: continue that run with "
            "--resume, or give an empty or new directory");
  }
  std::string resume_newest() {
    require(!options_.checkpoint_dir.empty(), "resuming the newest checkpoint needs a directory");
    const std::string path = decided_on_rank0([&] {
      return newest_checkpoint(options_.checkpoint_dir, checkpoint_size_limit(dp_.checkpoint));
    });
    require(!path.empty(), "no complete checkpoint in '", options_.checkpoint_dir,
            "' to resume from (run without --resume to start training)");
    load(path);
    return path;
  }
  std::string resume() {
    if (!options_.resume_from.empty()) {
      load(options_.resume_from);
      return options_.resume_from;
    }
    if (!options_.resume) return "";
    if (!options_.checkpoint_dir.empty()) return resume_newest();
    load(options_.checkpoint_path);
    return options_.checkpoint_path;
  }
  const CheckpointMap& checkpoint_map() const { return dp_.checkpoint; }
  const MemoryPlan& memory() const { return train_run_->memory(); }
  void add_observer(dispatch::Observer* observer) { train_run_->add_observer(observer); }
  const Graph& graph() const { return train_; }

  double evaluate() {
    require(test_run_ != nullptr, "evaluation is disabled, or this rank does not evaluate");
    train_run_->drain();   // the weights of the last run
    test_data_->rewind();  // every evaluation the same images
    int64_t samples = test_data_->samples();
    if (options_.test_samples > 0) samples = std::min(samples, options_.test_samples);
    const int64_t batches = samples / options_.test_batch;
    require(batches > 0, "the test split has ", samples, " samples, fewer than one test batch of ",
            options_.test_batch);
    double correct = 0;
    for (int64_t b = 0; b < batches; ++b) {
      test_run_->run();
      if (test_accuracy_) correct += scalar(*test_accuracy_);
    }
    return correct / batches;
  }

 private:
  TrainOptions options_;
  Graph train_;
  Graph test_;
  DataParallelGraph dp_;
  std::vector<DataFeed> train_feeds_;  // this rank's replicas' data ops
  bool data_primed_ = false;           // prime_data() ran
  DataSource* epoch_data_ = nullptr;   // replica 0's, on any rank (its metadata)
  std::vector<PipelineStage> stages_;  // each replica's pipeline (--stages)
  DataSource* test_data_ = nullptr;
  ReplicaOutputs test_outputs_;
  std::unique_ptr<LrSchedule> schedule_;
  int64_t iterations_done_ = 0;
  int64_t checked_ = 0;                            // the last iteration check_runs() checked
  std::map<const Blob*, Blob*> twins_;             // TrainOptions::run_ahead: add_run_ahead_twins
  std::unique_ptr<dispatch::Tracer> tracer_;       // declared before the runnables: outlives them
  std::unique_ptr<PipelineMeter> pipeline_meter_;  // likewise
  std::unique_ptr<Runnable> train_run_;
  std::unique_ptr<Runnable> test_run_;
  DivergenceWatch watch_;
  Blob* leader_loss_ = nullptr;    // dp_.loss, host-readable (rank 0)
  Blob* test_accuracy_ = nullptr;  // the test graph's accuracy, host-readable (its rank)
  int64_t blame_scans_ = 0;        // blame() calls
  // request_stop()'s signal, or kNoStop; written by any thread or a signal handler.
  std::atomic<int> stop_{kNoStop};
  int64_t saved_to_dir_ = -1;  // the iteration of the last save_to_dir()
  static_assert(std::atomic<int>::is_always_lock_free, "request_stop must be async-signal-safe");
};

std::unique_ptr<Graph> build_training_graph(const TrainOptions& options,
                                            std::set<const Blob*>* observed,
                                            std::vector<PipelineStage>* stages) {
  validate_options(options);
  auto graph = std::make_unique<Graph>("train");
  TrainingGraphParts parts = compose_training_graph(*graph, options, /*every_rank=*/true);
  if (observed) *observed = std::move(parts.observed);
  if (stages) *stages = std::move(parts.stages);
  return graph;
}

std::string stages_line(const std::vector<PipelineStage>& stages) {
  if (stages.empty()) return "";
  std::string line = stages.front().traced ? "stages by traced time" : "stages by estimated work";
  const int locations = stages.back().location + 1;
  line += static_cast<int>(stages.size()) > locations
              ? str(", stage j at location j mod ", locations, ":")
              : std::string(":");
  for (size_t s = 0; s < stages.size(); ++s) {
    const std::vector<std::string>& layers = stages[s].layers;
    line += str(s ? "," : "", " ", s, ": ", layers.front(),
                layers.size() > 1 ? str("..", layers.back()) : std::string(), " (",
                std::lround(100 * stages[s].cost_share), "%)");
  }
  return line + "\n";
}

std::string pipeline_shape(const TrainOptions& o) {
  if (o.virtual_stages == 1) return str(o.stages, " stages");
  return str(o.stages * o.virtual_stages, " stages interleaved over ", o.stages, " locations");
}

Trainer::Trainer(TrainOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Trainer::~Trainer() = default;
TrainResult Trainer::train(const std::function<void(const TrainProgress&)>& progress) {
  return impl_->train(progress);
}
void Trainer::request_stop(int signal) { impl_->request_stop(signal); }
double Trainer::evaluate() { return impl_->evaluate(); }
void Trainer::save_checkpoint(const std::string& path) const { impl_->save(path); }
void Trainer::load_checkpoint(const std::string& path) { impl_->load(path); }
std::string Trainer::resume_newest() { return impl_->resume_newest(); }
std::string Trainer::resume() { return impl_->resume(); }
const Graph& Trainer::training_graph() const { return impl_->graph(); }
const CheckpointMap& Trainer::checkpoint_map() const { return impl_->checkpoint_map(); }

const MemoryPlan& Trainer::memory() const { return impl_->memory(); }
void Trainer::add_observer(dispatch::Observer* observer) { impl_->add_observer(observer); }
int64_t Trainer::iterations_per_epoch() const { return impl_->iterations_per_epoch(); }
const std::vector<PipelineStage>& Trainer::pipeline_stages() const {
  return impl_->pipeline_stages();
}

}  // namespace purine
