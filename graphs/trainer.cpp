#include "graphs/trainer.hpp"

#include <algorithm>
#include <chrono>

#include "dispatcher/tracer.hpp"
#include "graphs/layers.hpp"
#include "graphs/lr_schedule.hpp"
#include "graphs/sgd.hpp"
#include "models/models.hpp"
#include "operators/idx_data.hpp"
#include "operators/registry.hpp"
#include "purine/autodiff.hpp"
#include "purine/base/error.hpp"
#include "purine/dsl.hpp"
#include "purine/runnable.hpp"
#include "purine/serialize.hpp"

namespace purine {

namespace {

using Clock = std::chrono::steady_clock;

// One network over a data split: data source -> model -> softmax loss, accuracy.
struct Network {
  explicit Network(const std::string& name) : graph(name) {}
  Graph graph;
  IdxDataOp* data = nullptr;
  Blob* loss = nullptr;
  Blob* accuracy = nullptr;
};

void build_network(Network& net, const TrainOptions& o, const std::string& split, int batch,
                   bool training) {
  Graph& g = net.graph;
  std::vector<Blob*> data;
  {
    // The data source runs on its own thread, prefetching while the model computes.
    Graph::Placement on_data_thread(g, Location::cpu(), "data");
    Attrs attrs;
    attrs.set("dir", o.data_dir)
        .set("split", split)
        .set("batch", batch)
        .set("shuffle", training ? 1 : 0)
        .set("seed", static_cast<int64_t>(o.seed));
    data = g.apply("data", "idx_data", attrs, {}, {"images", "labels"});
  }
  net.data = &dynamic_cast<IdxDataOp&>(g.op("data")->kernel());
  ModelSpec spec;
  spec.training = training;
  spec.classes = net.data->classes();
  Blob* logits = find_model(o.model)(g, data[0], spec);
  auto& loss = g.add<SoftmaxLossLayer>("loss");
  B{logits, data[1]} >> loss;
  net.loss = loss.top(0);
  net.accuracy = g.apply("top1", "accuracy", {}, {loss.top(1), data[1]}, {"accuracy"})[0];
}

// Runs every parameter's and state's filler on its tensor, in registration order.
void initialize(const Graph& g, uint64_t seed) {
  Rng rng(seed);
  OpContext context{&rng};
  auto fill = [&](const Parameter& p) {
    auto filler = OperatorRegistry::create(p.filler, p.filler_attrs);
    filler->compute({}, {&p.blob->tensor()}, context);
  };
  for (const Parameter& p : g.parameters()) fill(p);
  for (const Parameter& p : g.states()) fill(p);
}

void check_options(const TrainOptions& o) {
  require(o.batch > 0, "--batch must be positive, got ", o.batch);
  require(o.epochs > 0 || o.max_iters > 0, "--epochs must be positive, got ", o.epochs);
  require(o.max_iters >= 0, "--max-iters must be non-negative, got ", o.max_iters);
  require(o.lr > 0, "--lr must be positive, got ", o.lr);
  require(o.threads > 0, "--threads must be positive, got ", o.threads);
  require(o.test_batch > 0, "test batch must be positive, got ", o.test_batch);
}

}  // namespace

class Trainer::Impl {
 public:
  explicit Impl(TrainOptions options) : options_(std::move(options)), train_("train"), test_("test") {
    check_options(options_);
    build_network(train_, options_, "train", options_.batch, true);
    std::vector<Blob*> weights;
    for (const Parameter& p : train_.graph.parameters()) weights.push_back(p.blob);
    Gradients grads = backward(train_.graph, train_.loss, weights);
    SgdOptions sgd;
    sgd.momentum = options_.momentum;
    sgd.weight_decay = options_.weight_decay;
    sgd_ = add_sgd(train_.graph, grads, sgd);
    initialize(train_.graph, options_.seed);

    LrScheduleOptions lr;
    lr.policy = options_.lr_policy;
    lr.base_lr = options_.lr;
    lr.gamma = options_.lr_gamma;
    lr.step_size = options_.lr_step > 0 ? options_.lr_step : iterations_per_epoch();
    lr.max_iter = std::max<int64_t>(1, total_iterations());
    lr.power = options_.lr_power;
    schedule_ = std::make_unique<LrSchedule>(lr);

    RunOptions run;
    run.mode = options_.mode;
    run.compute_threads = options_.threads;
    run.seed = options_.seed;
    train_run_ = std::make_unique<Runnable>(train_.graph, run);
    if (!options_.trace_path.empty()) {
      tracer_ = std::make_unique<dispatch::Tracer>();
      train_run_->add_observer(tracer_.get());
    }

    if (options_.evaluate) {
      build_network(test_, options_, "test", options_.test_batch, false);
      // The test graph reads the training graph's tensors (swaps included).
      for (const auto* list : {&test_.graph.parameters(), &test_.graph.states()})
        for (const Parameter& p : *list) p.blob->share_tensor(*train_.graph.blob(p.blob->name()));
      test_run_ = std::make_unique<Runnable>(test_.graph, run);
    }
  }

  int64_t iterations_per_epoch() const { return train_.data->batches_per_epoch(); }

  int64_t total_iterations() const {
    int64_t total = options_.epochs > 0 ? options_.epochs * iterations_per_epoch() : 0;
    if (options_.max_iters > 0) total = total > 0 ? std::min(total, options_.max_iters) : options_.max_iters;
    return total;
  }

  TrainResult train(const std::function<void(const TrainProgress&)>& progress) {
    TrainResult result;
    const auto start = Clock::now();
    Clock::time_point warm_start = start;
    const int64_t total = total_iterations();
    const int64_t warmup = std::min<int64_t>(10, total / 2);
    for (int64_t it = 0; it < total; ++it) {
      sgd_.set_learning_rate(schedule_->at(it));
      train_run_->run();
      result.final_loss = *train_.loss->tensor().data();
      result.iterations = it + 1;
      ++iterations_done_;
      auto now = Clock::now();
      if (result.iterations == warmup) warm_start = now;
      double timed = std::chrono::duration<double>(now - warm_start).count();
      int64_t timed_iters = result.iterations - warmup;
      if (timed_iters > 0 && timed > 0) {
        result.images_per_sec = timed_iters * static_cast<double>(options_.batch) / timed;
      }
      if (progress) {
        TrainProgress p;
        p.iteration = result.iterations;
        p.total_iterations = total;
        p.epoch = static_cast<int>(it / iterations_per_epoch()) + 1;
        p.loss = result.final_loss;
        p.images_per_sec = result.images_per_sec;
        double elapsed = std::chrono::duration<double>(now - start).count();
        p.eta_seconds = elapsed / result.iterations * (total - result.iterations);
        progress(p);
      }
    }
    if (tracer_) tracer_->write_chrome_trace(options_.trace_path, 0);
    if (options_.evaluate) result.test_accuracy = evaluate();
    result.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return result;
  }

  void save(const std::string& path) const {
    purine::save_checkpoint(train_.graph, path, options_.model, iterations_done_);
  }
  void load(const std::string& path) { iterations_done_ = purine::load_checkpoint(train_.graph, path); }
  const Graph& graph() const { return train_.graph; }

  double evaluate() {
    require(test_run_ != nullptr, "evaluation was disabled for this trainer");
    int64_t samples = test_.data->samples();
    if (options_.test_samples > 0) samples = std::min(samples, options_.test_samples);
    const int64_t batches = samples / options_.test_batch;
    require(batches > 0, "the test split has ", samples, " samples, fewer than one test batch of ",
            options_.test_batch);
    double correct = 0;
    for (int64_t b = 0; b < batches; ++b) {
      test_run_->run();
      correct += *test_.accuracy->tensor().data();
    }
    return correct / batches;
  }

 private:
  TrainOptions options_;
  Network train_;
  Network test_;
  SgdGraph sgd_;
  std::unique_ptr<LrSchedule> schedule_;
  int64_t iterations_done_ = 0;
  std::unique_ptr<dispatch::Tracer> tracer_;  // declared first: outlives the runnables
  std::unique_ptr<Runnable> train_run_;
  std::unique_ptr<Runnable> test_run_;
};

Trainer::Trainer(TrainOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Trainer::~Trainer() = default;
TrainResult Trainer::train(const std::function<void(const TrainProgress&)>& progress) {
  return impl_->train(progress);
}
double Trainer::evaluate() { return impl_->evaluate(); }
void Trainer::save_checkpoint(const std::string& path) const { impl_->save(path); }
void Trainer::load_checkpoint(const std::string& path) { impl_->load(path); }
const Graph& Trainer::training_graph() const { return impl_->graph(); }
int64_t Trainer::iterations_per_epoch() const { return impl_->iterations_per_epoch(); }

}  // namespace purine
