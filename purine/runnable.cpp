#include "purine/runnable.hpp"

#include <glog/logging.h>

#include "operators/cpu/threading.hpp"
#include "purine/base/error.hpp"

namespace purine {

namespace {

// What one task needs at run time, resolved once at build time.
struct OpBinding {
  Operator* kernel;
  std::vector<const Tensor*> inputs;
  std::vector<Tensor*> outputs;
  OpContext context;
};

uint64_t location_seed(uint64_t seed, Location l) {
  // Distinct, fixed streams per location; splitmix-style mixing of (seed, rank, device).
  uint64_t x = seed + 0x9E3779B97F4A7C15ULL * (static_cast<uint64_t>(l.rank) * 1024 + l.device + 2);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

Runnable::Runnable(Graph& graph, RunOptions options) : graph_(graph), options_(options) {
  graph_.validate();
  dispatch::Plan plan;
  std::map<std::pair<Location, std::string>, dispatch::ExecutorId> executors;
  std::map<Location, dispatch::ResourceId> rng_resources;
  std::map<const Op*, dispatch::TaskId> task_of;
  const int threads = options_.compute_threads;

  for (Op* op : graph_.topological_order()) {
    if (op->location().rank != options_.rank) continue;
    auto key = std::make_pair(op->location(), op->thread());
    auto ex = executors.find(key);
    if (ex == executors.end()) {
      dispatch::ExecutorSpec spec;
      spec.name = op->location().to_string() + "/" + op->thread();
      spec.on_thread_start = [threads] { set_compute_threads(threads); };
      ex = executors.emplace(key, plan.add_executor(std::move(spec))).first;
    }
    auto binding = std::make_shared<OpBinding>();
    binding->kernel = &op->kernel();
    for (Blob* b : op->inputs()) binding->inputs.push_back(&b->tensor());
    for (Blob* b : op->outputs()) binding->outputs.push_back(&b->tensor());
    if (op->kernel().uses_rng()) {
      auto& rng = rngs_[op->location()];
      if (!rng) rng = std::make_unique<Rng>(location_seed(options_.seed, op->location()));
      binding->context.rng = rng.get();
    }
    dispatch::Task task;
    task.name = op->name();
    task.location = op->location().to_string();
    task.executor = ex->second;
    task.run = [binding] {
      binding->kernel->compute(binding->inputs, binding->outputs, binding->context);
    };
    dispatch::TaskId id = plan.add_task(std::move(task));
    task_of[op] = id;
    if (op->kernel().uses_rng()) {
      auto res = rng_resources.find(op->location());
      if (res == rng_resources.end())
        res = rng_resources.emplace(op->location(),
                                    plan.add_resource("rng@" + op->location().to_string()))
                  .first;
      plan.use_resource(id, res->second);
    }
  }
  // Dependencies: every writer of an input before the reader; the writers of an accumulating
  // blob one after another, in creation order.
  for (const auto& [op, id] : task_of) {
    for (const Blob* in : op->inputs())
      for (const Op* w : in->writers()) {
        auto it = task_of.find(w);
        if (it != task_of.end()) plan.add_dependency(it->second, id);
      }
  }
  for (const auto& b : graph_.blobs()) {
    const auto& writers = b->writers();
    for (size_t i = 1; i < writers.size(); ++i) {
      auto a = task_of.find(writers[i - 1]), c = task_of.find(writers[i]);
      if (a != task_of.end() && c != task_of.end()) plan.add_dependency(a->second, c->second);
    }
  }
  // The serial engine runs tasks on the caller's thread: bound its compute threads too.
  if (options_.mode == dispatch::Mode::kSerial) set_compute_threads(threads);
  dispatch::EngineOptions engine_options;
  engine_options.mode = options_.mode;
  engine_options.stall_timeout = options_.stall_timeout;
  engine_ = std::make_unique<dispatch::Engine>(std::move(plan), engine_options);
}

Runnable::~Runnable() = default;

void Runnable::run_async() { engine_->run_async(); }

void Runnable::sync() {
  engine_->sync();
  for (auto& [a, b] : graph_.swaps()) {
    if (a->location().rank == options_.rank) a->tensor().swap_memory(b->tensor());
  }
}

void Runnable::add_observer(dispatch::Observer* observer) { engine_->add_observer(observer); }

int Runnable::num_tasks() const { return static_cast<int>(engine_->plan().tasks().size()); }

}  // namespace purine
