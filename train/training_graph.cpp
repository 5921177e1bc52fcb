#include "train/training_graph.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <optional>

#include "base/error.hpp"
#include "graphs/channel_blocks.hpp"
#include "graphs/copies.hpp"
#include "graphs/fusion.hpp"
#include "graphs/layers.hpp"
#include "graphs/model_parallel.hpp"
#include "models/models.hpp"
#include "operators/conv.hpp"
#include "purine/dsl.hpp"

namespace purine {

namespace {

// --locations, or the number of --devices.
int locations_per_rank(const TrainOptions& o) {
  return o.devices.empty() ? o.locations : static_cast<int>(o.devices.size());
}

// The first `count` locations of rank r: its CPU locations, or its --devices.
std::vector<Location> rank_locations(const TrainOptions& o, int rank, int count) {
  std::vector<Location> at;
  for (int k = 0; k < count; ++k)
    at.push_back(o.devices.empty() ? Location::cpu(rank, k) : Location::gpu(o.devices[k], rank));
  return at;
}

// The model's layers, found by building it once in a scratch graph on images of `images`'
// size, costed at one training micro-batch whatever the batch of the graph being built: the
// pipeline's cut depends on the costs, and the test graph's layers must be where the training
// graph's weights they share are.
std::vector<ModelLayer> layers_of(const TrainOptions& o, const Shape& images, int64_t classes) {
  ModelSpec spec;
  spec.classes = classes;
  std::vector<int64_t> dims = images.dims();
  dims[0] = o.batch / replicas_per_rank(o) / o.micro_batches;
  std::vector<ModelLayer> layers = model_layers([&](Graph& scratch) {
    find_model(o.model)(scratch, scratch.add_blob("images", Shape(dims)), spec);
  });
  if (!o.stage_seconds.empty())
    require(measure_layers(layers, o.stage_seconds) > 0, "--stage-trace '", o.stage_trace,
            "' times no op of model '", o.model,
            "'; trace a run of this model (purine train --model=", o.model, " --trace=FILE)");
  return layers;
}

// The units `o` cuts the model's layers into and the stage of each, over `stages`
// (graphs/pipeline.hpp).
struct PipelineCut {
  std::vector<ModelLayer> units;
  std::vector<int> stage_of;
  std::vector<double> stage_costs;  // per stage, its share of the estimated work; none unknown
};
PipelineCut cut_pipeline(const TrainOptions& o, const std::vector<ModelLayer>& layers,
                         const std::vector<Location>& stages) {
  PipelineCut cut{stage_units(layers, o.stage_cut), {}, {}};
  if (o.virtual_stages > 1) {
    const auto parametric = std::count_if(cut.units.begin(), cut.units.end(),
                                          [](const ModelLayer& u) { return u.parameters > 0; });
    require(o.stages * o.virtual_stages <= parametric, "--stages=", o.stages,
            " with --virtual-stages=", o.virtual_stages, " cuts model '", o.model, "' into ",
            o.stages * o.virtual_stages, " stages, but it has ", parametric,
            " layers or parts with parameters to cut between; use fewer");
  }
  cut.stage_of =
      assign_stages(cut.units, o.stages * o.virtual_stages, o.model, stage_link_slowdown(stages),
                    PipelineRun{o.stages, o.micro_batches, o.schedule});
  double total = 0;
  for (const ModelLayer& unit : cut.units) total += unit.cost;
  if (total > 0) {
    cut.stage_costs.assign(o.stages * o.virtual_stages, 0);
    for (size_t i = 0; i < cut.units.size(); ++i)
      cut.stage_costs[cut.stage_of[i]] += cut.units[i].cost / total;
  }
  return cut;
}

// Splits the --split layers (graphs/model_parallel.hpp), after checking that each names a
// layer with parameters of the model.
void split_layers(Graph& g, const TrainOptions& o, const std::vector<ModelLayer>& layers,
                  const std::vector<Location>& locations) {
  std::string names;
  for (const ModelLayer& layer : layers)
    if (layer.parameters > 0) names += str(names.empty() ? "" : ", ", layer.name);
  for (const std::string& entry : o.split) {
    const std::string name = split_layer_name(entry);
    const bool found = std::any_of(layers.begin(), layers.end(), [&](const ModelLayer& layer) {
      return layer.parameters > 0 && rule_names(name, layer.name);
    });
    require(found, "--split: model '", o.model, "' has no layer with parameters named '", name,
            "'; it has ", names);
  }
  model_parallel(g, o.split, locations);
}

// The single-device network: data source (on its own thread) -> model -> softmax loss and, to
// evaluate, accuracy (training reports the loss only, so its graph computes no accuracy: a
// kernel per iteration on a GPU, a message per rank in data parallelism). Replica r of n reads
// the r-th slice of every global batch. `*feed` is set to the data op and what the network reads
// of it (prefetched in training when the options say so).
ReplicaOutputs build_micro_network(Graph& g, const TrainOptions& o, const std::string& split,
                                   int batch, bool training, int slice, int slices, int replica,
                                   bool lay_out, DataFeed* feed, std::optional<PipelineCut>* cut) {
  const bool prefetch = training && o.prefetch;
  const std::vector<std::string> names = {"images", "labels"};
  const Location here = g.current_location();
  std::vector<Blob*> data;
  {
    // Files are read on the host: a replica on a GPU reads from its rank's CPU (the builder
    // copies the batch over).
    Graph::Placement on_data_thread(g, here.is_cpu() ? here : Location::cpu(here.rank), "data");
    Attrs attrs;
    attrs.set("split", split)
        .set("batch", batch)
        .set("seed", static_cast<int64_t>(o.seed))
        .set("rank", slice)
        .set("ranks", slices);
    const std::vector<std::string> outputs =
        prefetch ? std::vector<std::string>{"images_next", "labels_next"} : names;
    SyntheticData synthetic;
    if (parse_synthetic_data(o.data_dir, &synthetic)) {
      attrs.set("channels", synthetic.channels)
          .set("rows", synthetic.rows)
          .set("cols", synthetic.cols)
          .set("classes", synthetic.classes);
      data = g.apply("data", "synthetic_data", attrs, {}, outputs);
    } else {
      attrs.set("dir", o.data_dir)
          .set("shuffle", training ? 1 : 0)
          .set("mirror", training && o.mirror ? 1 : 0)
          .set("classes", o.classes)
          // Pixels standardized: (pixel / 255 - mean) / std.
          .set("scale", 1.0 / (255.0 * o.input_std))
          .set("mean", o.input_mean / o.input_std);
      data = g.apply("data", "idx_data", attrs, {}, outputs);
    }
    feed->op = data[0]->writers()[0];
    if (prefetch) {
      for (size_t i = 0; i < data.size(); ++i) {
        Blob* current = g.add_blob(names[i], data[i]->shape());
        g.add_swap(current, data[i]);
        feed->host.push_back(current);
      }
      data = feed->host;
    }
  }
  feed->source = feed->op->kernel().data_source();
  // A replica on a GPU gets the batch by copies on its "data" stream, apart from its compute.
  // With prefetch the copy's output is the next batch: nothing else may read it (no op at the
  // GPU reads the host's "images" or "labels" but these copies).
  if (!here.is_cpu()) {
    for (size_t i = 0; i < data.size(); ++i) {
      Blob* copied = g.copy_to(data[i], here, "data");
      if (prefetch) {
        Graph::Placement at(g, here, "data");
        Blob* current = g.add_blob(names[i] + "_device", copied->shape());
        g.add_swap(current, copied);
        feed->device.push_back(current);
        copied = current;
      }
      data[i] = copied;
    }
  }
  DataSource* const source = feed->source;
  CHECK(source != nullptr) << "the data operator is no DataSource";
  ModelSpec spec;
  spec.training = training;
  spec.classes = source->classes();
  // The layout rules apply to the composites created after them: the first micro-batch sets
  // them for all.
  if (lay_out && (o.stages > 1 || !o.split.empty())) {
    const std::vector<Location> at = layout_locations(o, replica);
    std::vector<ModelLayer> layers;
    if (!o.split.empty() || !*cut) layers = layers_of(o, data[0]->shape(), spec.classes);
    if (o.stages > 1) {
      // One cut for all replicas: their locations are alike (stage_link_slowdown).
      if (!*cut) *cut = cut_pipeline(o, layers, at);
      place_stages(g, (*cut)->units, (*cut)->stage_of, at);
    }
    if (!o.split.empty()) split_layers(g, o, layers, at);
  }
  Blob* logits = find_model(o.model)(g, data[0], spec);
  // A pipeline's loss is computed at its last stage, so that no stage waits for the others
  // within a micro-batch's forward pass; its values come back to the network's location.
  ReplicaOutputs out;
  {
    Graph::Placement at_loss(g, o.stages > 1 ? layout_locations(o, replica).back() : here);
    auto& loss = g.add<SoftmaxLossLayer>("loss");
    B{logits, data[1]} >> loss;
    out.loss = loss.top(0);
    if (!training)
      out.accuracy = g.apply("top1", "accuracy", {}, {loss.top(1), data[1]}, {"accuracy"})[0];
  }
  for (Blob** b : {&out.loss, &out.accuracy})
    if (*b && (*b)->location() != here) *b = g.copy_to(*b, here, Graph::kMainThread);
  // The forward graph is whole: fuse before autodiff derives the backward pass from it.
  if (o.fuse) fuse_forward(g, o.fuse_siblings);
  return out;
}

DivergenceWatch watch_divergence(Graph& g, const DataParallelGraph& dp, int rank) {
  DivergenceWatch watch;
  for (size_t r = 0; r < dp.replicas.size(); ++r)
    if (dp.locations[r].rank == rank)
      watch.replica_losses[r] = host_readable(g, dp.replicas[r].loss);
  std::set<const Blob*> parameters;
  for (const Parameter& p : g.parameters()) parameters.insert(p.blob);
  std::map<Location, std::vector<Blob*>> updated;  // the new weights, by location
  for (const auto& [weight, next] : g.swaps())
    if (weight->location().rank == rank && parameters.count(weight))
      updated[weight->location()].push_back(next);
  for (const auto& [location, weights] : updated) {
    Graph::Scope root(g, "divergence", true);
    // At a CPU the updates count as they write (graphs/fusion.hpp) and a sum adds their counts;
    // a count_non_finite op reads the weights they do not count (at a GPU, all of them).
    std::vector<Blob*> uncounted, parts;
    if (location.is_cpu())
      parts = count_in_updates(g, weights, &uncounted);
    else
      uncounted = weights;
    Graph::Placement at(g, location);
    Graph::RoleScope role(g, OpRole::kMonitor);
    const std::string suffix = "@" + location.to_string();
    Blob* count = nullptr;
    if (parts.empty()) {
      count = g.apply("non_finite_weights" + suffix, "count_non_finite", {}, uncounted,
                      {"count" + suffix})[0];
    } else {
      if (!uncounted.empty())
        parts.push_back(g.apply("uncounted" + suffix, "count_non_finite", {}, uncounted,
                                {"uncounted_count" + suffix})[0]);
      count = g.apply("non_finite_weights" + suffix, "sum", {}, parts, {"count" + suffix})[0];
    }
    watch.non_finite_weights.emplace_back(location, host_readable(g, count));
  }
  return watch;
}

// The stages of `cut`, as purine train prints them.
std::vector<PipelineStage> pipeline_stages_of(const TrainOptions& o, const PipelineCut& cut) {
  const std::vector<ModelLayer>& layers = cut.units;
  const std::vector<int>& stage_of = cut.stage_of;
  std::vector<PipelineStage> stages(o.stages * o.virtual_stages);
  for (size_t j = 0; j < stages.size(); ++j) {
    stages[j].traced = !o.stage_seconds.empty();
    stages[j].location = static_cast<int>(j) % o.stages;
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    // Without the model's scope: "conv1", or a part "inception_3b::3x3".
    const size_t scope = layers[i].name.find("::");
    stages[stage_of[i]].layers.push_back(
        scope == std::string::npos ? layers[i].name : layers[i].name.substr(scope + 2));
  }
  for (size_t j = 0; j < cut.stage_costs.size(); ++j) stages[j].cost_share = cut.stage_costs[j];
  return stages;
}

// Running ahead (TrainOptions::run_ahead): a run's replay may still be on the device while the
// host writes the next run's learning rate and reads losses, so each host blob the trainer
// writes before a run or reads after it gets a twin, exchanged with it after every run (a swap,
// as new weights are): the run in flight keeps its own. After run k's sync its values are in the
// twins (once it has run); after run k + 1's sync they are back in the blobs themselves.
void add_run_ahead_twins(Graph& g, int rank, TrainingGraphParts& out) {
  std::set<Blob*> host;
  for (const auto* scalars : {&out.dp.sgd.learning_rate_blobs(), &out.dp.sgd.step_blobs()})
    for (const auto& [location, blob] : *scalars)
      if (location.rank == rank) host.insert(blob);
  for (const auto& [r, loss] : out.watch.replica_losses) host.insert(loss);
  for (const auto& [location, count] : out.watch.non_finite_weights) host.insert(count);
  if (out.leader_loss) host.insert(out.leader_loss);
  for (Blob* blob : host) {
    Graph::Placement at(g, blob->location());
    Blob* twin = g.add_blob(blob->name() + "::twin", blob->shape());
    g.add_swap(blob, twin);
    out.twins[blob] = twin;
    out.observed.insert(twin);
  }
}

}  // namespace

std::vector<Location> layout_locations(const TrainOptions& o, int replica) {
  if (o.parallel == ParallelLayout::kHybrid)
    return rank_locations(o, replica, o.stages > 1 ? o.stages : locations_per_rank(o));
  if (o.parallel == ParallelLayout::kPipeline && o.ranks > 1) {
    std::vector<Location> at;  // stage s at rank s
    for (int s = 0; s < o.stages; ++s) at.push_back(rank_locations(o, s, 1)[0]);
    return at;
  }
  if (o.parallel == ParallelLayout::kPipeline) return rank_locations(o, 0, o.stages);
  std::vector<Location> at;  // kModel: every location of every rank, rank by rank
  for (int r = 0; r < o.ranks; ++r)
    for (const Location& l : rank_locations(o, r, locations_per_rank(o))) at.push_back(l);
  return at;
}

std::vector<Location> replica_locations(const TrainOptions& o) {
  if (o.parallel == ParallelLayout::kPipeline || o.parallel == ParallelLayout::kModel)
    return {layout_locations(o, 0)[0]};
  std::vector<Location> locations;
  for (int r = 0; r < o.ranks; ++r)
    for (const Location& l : rank_locations(o, r, replicas_per_rank(o))) locations.push_back(l);
  return locations;
}

namespace {

// build_network(), with a pipeline's cut made at the first replica built and kept in `cut` for
// the others.
ReplicaOutputs build_replica(Graph& g, const TrainOptions& o, const std::string& split, int batch,
                             bool training, int replica, int replicas, std::vector<DataFeed>* feeds,
                             std::optional<PipelineCut>* cut) {
  const int micro = training ? o.micro_batches : 1;
  if (micro == 1) {
    feeds->emplace_back();
    return build_micro_network(g, o, split, batch, training, replica, replicas, replica, true,
                               &feeds->back(), cut);
  }
  std::vector<Blob*> losses;
  const std::string outer = g.scope_prefix();
  for (int m = 0; m < micro; ++m) {
    Graph::Scope scope(g, "micro" + std::to_string(m));
    g.share_parameters(g.scope_prefix(), outer);
    feeds->emplace_back();
    const ReplicaOutputs out =
        build_micro_network(g, o, split, batch / micro, training, replica * micro + m,
                            replicas * micro, replica, m == 0, &feeds->back(), cut);
    losses.push_back(out.loss);
  }
  const Location here = g.current_location();
  ReplicaOutputs out;
  out.loss = (B(losses) >> g.add<Aggregate>("micro_loss", here, Aggregate::Mode::kAverage)).top(0);
  return out;
}

}  // namespace

ReplicaOutputs build_network(Graph& g, const TrainOptions& o, const std::string& split, int batch,
                             bool training, int replica, int replicas,
                             std::vector<DataFeed>* feeds) {
  std::optional<PipelineCut> cut;
  return build_replica(g, o, split, batch, training, replica, replicas, feeds, &cut);
}

Blob* host_readable(Graph& g, Blob* blob) {
  if (blob->location().is_cpu()) return blob;
  Graph::RoleScope role(g, OpRole::kMonitor);
  return g.copy_to(blob, Location::cpu(blob->location().rank), Graph::kMainThread);
}

TrainingGraphParts compose_training_graph(Graph& train, const TrainOptions& o, bool every_rank) {
  TrainingGraphParts out;
  require(
      o.ring_steps != RingSteps::kMachines || static_cast<int>(o.machine_of_rank.size()) >= o.ranks,
      "--ring-steps=machines needs the machine of every rank, but "
      "TrainOptions::machine_of_rank has ",
      o.machine_of_rank.size(), " for ", o.ranks,
      " ranks (purine train finds them at start-up: mpi_machine_of_ranks())");
  const std::vector<Location> locations = replica_locations(o);
  const int replicas = replicas_per_rank(o);
  DataParallelOptions dp_options;
  dp_options.reduction = o.reduce;
  dp_options.bucket_bytes = o.bucket_kb * 1024;
  dp_options.ring.steps = o.ring_steps;
  dp_options.ring.machine_of_rank = o.machine_of_rank;
  dp_options.sync_batch_norm = o.sync_bn;
  dp_options.sgd.optimizer = o.optimizer;
  dp_options.sgd.momentum = o.momentum;
  dp_options.sgd.beta1 = o.beta1;
  dp_options.sgd.beta2 = o.beta2;
  dp_options.sgd.eps = o.eps;
  dp_options.clip_norm = o.clip_norm;
  dp_options.sgd.weight_decay = o.weight_decay;
  std::optional<PipelineCut> cut;  // a pipeline's, as the replicas are built
  out.dp = build_data_parallel(
      train, locations,
      [&](Graph& g, int r, int n) {
        std::vector<DataFeed> feeds;
        const ReplicaOutputs replica =
            build_replica(g, o, "train", o.batch / replicas, true, r, n, &feeds, &cut);
        // This process's own data ops; every rank knows the first one's epoch.
        if (locations[r].rank == o.rank)
          out.feeds.insert(out.feeds.end(), feeds.begin(), feeds.end());
        if (r == 0) out.epoch_data = feeds[0].source;
        return replica;
      },
      dp_options);
  if (cut) out.stages = pipeline_stages_of(o, *cut);
  // The backward passes are built: their gradient fan-ins into ReLUs' gradients, before the
  // schedules order those ops (graphs/fusion.hpp).
  if (o.fuse) fuse_relu_grad_sums(train);
  // The micro-batches of a pipeline, and of a replica at one location (gradient
  // accumulation: a one-stage pipeline, so that 1F1B runs them one after another and the
  // memory plan gives them one micro-batch's memory), follow the schedule.
  const bool one_location_replicas =
      o.parallel == ParallelLayout::kNone || o.parallel == ParallelLayout::kData;
  if (o.micro_batches > 1 && (o.stages > 1 || one_location_replicas))
    for (int r = 0; r < static_cast<int>(locations.size()); ++r) {
      if (o.stages == 1) {
        schedule_pipeline(train, {locations[r]}, o.micro_batches, o.schedule);
        continue;
      }
      const std::vector<Location> at = layout_locations(o, r);
      schedule_pipeline(
          train, at, o.micro_batches, o.schedule, o.virtual_stages,
          o.virtual_stages > 1 ? chunks_of(train, cut->units, cut->stage_of, at) : ChunkOf{},
          cut->stage_costs);
    }
  // At a GPU the updates of the weights the backward pass differentiated are one kernel
  // (graphs/fusion.hpp), once the schedules have ordered what they order.
  if (o.fuse) fuse_updates(train, /*gpus_only=*/true);
  // After the schedules, which need not know these ops (they only read what updates wrote).
  out.observed = {out.dp.loss};
  for (const ReplicaOutputs& replica : out.dp.replicas) out.observed.insert(replica.loss);
  for (int rank = 0; rank < o.ranks; ++rank) {
    if (!every_rank && rank != o.rank) continue;
    DivergenceWatch watch = watch_divergence(train, out.dp, rank);
    for (const auto& [r, loss] : watch.replica_losses) out.observed.insert(loss);
    for (const auto& [location, count] : watch.non_finite_weights) out.observed.insert(count);
    if (rank == o.rank) out.watch = std::move(watch);
  }
  if (o.rank == 0 || every_rank) out.leader_loss = host_readable(train, out.dp.loss);
  if (out.leader_loss) out.observed.insert(out.leader_loss);
  if (o.run_ahead && o.cuda_graph && !o.devices.empty() && !every_rank)
    add_run_ahead_twins(train, o.rank, out);
  // The whole graph is built: which activations every op touching them can take in channel
  // blocks (graphs/channel_blocks.hpp).
  if (o.block_channels) block_channels(train, conv_channel_block());
  return out;
}

}  // namespace purine
