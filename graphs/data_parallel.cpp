#include "graphs/data_parallel.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "base/error.hpp"
#include "graphs/copies.hpp"
#include "graphs/internal/buckets.hpp"
#include "purine/autodiff.hpp"
#include "purine/dsl.hpp"

namespace purine {

namespace {

// The mean of one scalar per replica, at locations[0].
Blob* replica_mean(Graph& g, const std::string& name, const std::vector<Blob*>& values,
                   const std::vector<Location>& locations) {
  Graph::Placement placement(g, locations[0], Graph::kCommThread);
  return (B(values) >> g.add<Aggregate>(name, locations[0], Aggregate::Mode::kAverage)).top(0);
}

// The single-device name of a name in replica r: what follows the scope "replica<r>::".
std::string single_device_name(const std::string& name, int replica) {
  const std::string scope = "replica" + std::to_string(replica) + "::";
  for (size_t at = name.find(scope); at != std::string::npos; at = name.find(scope, at + 1))
    if (starts_scope(name, at)) return name.substr(at + scope.size());
  LOG(FATAL) << name << " is not in the scope " << scope;
  return name;
}

// Records in `map` that `holder` keeps parameter or state `p` of replica r, or, with a
// `suffix`, its tensor of that name (a momentum history): the same piece of a tensor named
// after `p`'s single-device tensor. `saved`: the checkpoint is saved from this holder.
void map_piece(CheckpointMap& map, const Parameter& p, int replica, Blob* holder,
               const std::string& suffix, bool saved) {
  const bool whole = p.whole.empty();
  TensorPiece piece = piece_of(p);
  piece.blob = holder;
  add_piece(map, single_device_name(whole ? p.blob->name() : p.whole, replica) + suffix,
            whole ? p.blob->shape() : p.whole_shape, piece, saved);
}

// The optimizer states add_sgd_update made for `weight`, with their names.
std::vector<std::pair<std::string, Blob*>> states_of(const Graph& g, const Blob* weight,
                                                     const SgdOptions& options) {
  std::vector<std::pair<std::string, Blob*>> states;
  for (const std::string& name : optimizer_states(options))
    states.emplace_back("::" + name, g.blob(weight->name() + "::" + name));
  return states;
}

// An update to build: `parameter` (a weight, or a chunk of one) from its reduced gradient
// `grad`; `finish` takes the new weight (swaps it in or sends it on, maps the optimizer's
// states). `counted`: `grad` covers its elements once among all the pending updates (the global
// norm sums every element once).
struct PendingUpdate {
  Parameter parameter;
  Blob* grad = nullptr;
  bool counted = false;
  std::function<void(Blob* updated)> finish;
};

// The updates of the reductions, built at once, or with gradient clipping once every gradient
// is reduced (clip_updates).
class Updates {
 public:
  Updates(Graph& g, DataParallelGraph& dp, const DataParallelOptions& options)
      : g_(g), dp_(dp), options_(options) {}

  void add(PendingUpdate update) {
    if (options_.clip_norm > 0)
      pending_.push_back(std::move(update));
    else
      build(update, nullptr);
  }

  // Gradient clipping by global norm: every counted gradient's sum of squares, at its location;
  // at each updater's location, the scale from all of them (in one order); every gradient
  // scaled before its update.
  void build_clipped() {
    if (pending_.empty()) return;
    std::vector<Blob*> squares;
    for (const PendingUpdate& u : pending_) {
      if (!u.counted) continue;
      Graph::Placement placement(g_, u.grad->location(), Graph::kCommThread);
      squares.push_back(g_.apply(u.grad->name() + "::sum_squares", "sum_squares", {}, {u.grad},
                                 {u.grad->name() + "::squares"})[0]);
    }
    std::map<Location, Blob*> scales;
    for (const PendingUpdate& u : pending_) {
      const Location at = u.parameter.blob->location();
      Blob*& scale = scales[at];
      if (!scale) {
        Graph::Scope root(g_, "clip", true);
        Graph::Placement placement(g_, at, Graph::kCommThread);
        scale = g_.apply("scale@" + at.to_string(), "clip_scale",
                         Attrs().set("max_norm", options_.clip_norm), squares,
                         {"factor@" + at.to_string()})[0];
      }
      build(u, scale);
    }
    pending_.clear();
  }

 private:
  void build(const PendingUpdate& u, Blob* scale) {
    Blob* grad = u.grad;
    if (scale) {
      Graph::Placement placement(g_, grad->location(), Graph::kCommThread);
      grad = g_.apply(grad->name() + "::clip", "scale_by", {}, {grad, scale},
                      {grad->name() + "::clipped"})[0];
    }
    const Location at = u.parameter.blob->location();
    u.finish(add_sgd_update(g_, u.parameter, grad, dp_.sgd.learning_rate(g_, at), options_.sgd,
                            &dp_.sgd));
  }

  Graph& g_;
  DataParallelGraph& dp_;
  const DataParallelOptions& options_;
  std::vector<PendingUpdate> pending_;
};

// Parameter i alone with kRing: reduce-scatter its gradient, update on each rank the chunk of
// the weights whose gradient it summed (its momentum covers that chunk only), all-gather the
// new weights: the same traffic as an allreduce of the gradient, 1/N of the update work per rank.
void reduce_sharded(Graph& g, DataParallelGraph& dp, const std::vector<Gradients>& grads, int i,
                    const DataParallelOptions& options, Updates& updates) {
  const int n = static_cast<int>(dp.locations.size());
  std::vector<Blob*> parts;
  for (int r = 0; r < n; ++r) parts.push_back(grads[r].of(dp.parameters[r][i].blob));
  const std::string name = dp.parameters[0][i].blob->name();
  const auto shards =
      std::make_shared<RingShards>(ring_reduce_scatter(g, name + "::reduce", parts, options.ring));
  // The new chunks, gathered into every replica's weights once all are built.
  const auto updated = std::make_shared<std::vector<Blob*>>(n, nullptr);
  const auto left = std::make_shared<int>(0);
  for (int r = 0; r < n; ++r) *left += shards->owned[r] != nullptr;
  for (int r = 0; r < n; ++r) {
    if (!shards->owned[r]) continue;
    Parameter chunk = dp.parameters[r][i];
    {
      Graph::Scope scope(g, chunk.blob->name() + "::shard", true);
      Graph::Placement placement(g, chunk.blob->location(), Graph::kCommThread);
      chunk.blob = flat_chunks(g, "weight", chunk.blob, *shards)[shards->chunk_of(r)];
    }
    auto finish = [&g, &dp, &options, shards, updated, left, i, r, name, chunk](Blob* weights) {
      (*updated)[r] = weights;
      // Each location's states cover its chunk, at the chunk's place in the whole.
      Parameter piece = dp.parameters[r][i];
      for (int c = 0; c < shards->chunk_of(r); ++c) piece.offset += shards->sizes[c];
      for (const auto& [suffix, state] : states_of(g, chunk.blob, options.sgd))
        map_piece(dp.checkpoint, piece, r, state, suffix, true);
      if (--*left > 0) return;
      const std::vector<Blob*> gathered = ring_all_gather(g, name + "::gather", *shards, *updated);
      for (size_t q = 0; q < gathered.size(); ++q)
        g.add_swap(dp.parameters[q][i].blob, gathered[q]);
    };
    updates.add({chunk, shards->owned[r], true, finish});
  }
}

// The gradients of the parameters `members` reduced together (several: fused into one flat blob
// per replica, the sum cut back afterwards), then the usual updates: on every replica, or with a
// parameter server there, its new weights then sent to every replica.
void reduce_together(Graph& g, DataParallelGraph& dp, const std::vector<Gradients>& grads,
                     const std::vector<int>& members, int server,
                     const DataParallelOptions& options, Updates& updates) {
  const int n = static_cast<int>(dp.locations.size());
  // Parameter i of replica r, or (r == n) the server's master copy.
  auto parameter = [&dp, n](int r, int i) -> const Parameter& {
    return r < n ? dp.parameters[r][i] : dp.server_parameters[i];
  };
  // Where replica r (or the server) keeps the members (a layer split over locations keeps its
  // pieces apart; buckets only join members kept together).
  auto at = [parameter, members](int r) { return parameter(r, members[0]).blob->location(); };
  const bool fused = members.size() > 1;
  const std::string name =
      dp.parameters[0][members[0]].blob->name() + (fused ? "::bucket" : "::reduce");
  std::vector<Shape> shapes;
  for (int i : members) shapes.push_back(dp.parameters[0][i].blob->shape());
  std::vector<Blob*> parts;
  for (int r = 0; r < n; ++r) {
    std::vector<Blob*> local;
    for (int i : members) local.push_back(grads[r].of(dp.parameters[r][i].blob));
    Graph::Placement placement(g, at(r), Graph::kCommThread);
    parts.push_back(fused ? fuse(g, name + "::fuse" + std::to_string(r), local) : local[0]);
  }
  // Every replica that updates, with the sum at its location.
  std::vector<std::pair<int, Blob*>> sums;
  if (options.reduction == Reduction::kParameterServer) {
    Graph::Placement placement(g, at(server), Graph::kCommThread);
    sums.emplace_back(server, (parts >> g.add<Aggregate>(name, at(server))).top(0));
  } else {
    std::vector<Blob*> all =
        options.reduction == Reduction::kRing  ? ring_allreduce(g, name, parts, options.ring)
        : options.reduction == Reduction::kMpi ? mpi_allreduce(g, name, parts)
                                               : nccl_allreduce(g, name, parts);
    for (int r = 0; r < n; ++r) sums.emplace_back(r, all[r]);
  }
  // Every updater holds optimizer states; the first updater's are saved.
  const int first = sums[0].first;
  for (const auto& [r, sum] : sums) {
    std::vector<Blob*> pieces = {sum};
    if (fused) {
      Graph::Placement placement(g, at(r), Graph::kCommThread);
      pieces = unfuse(g, name + "::unfuse" + std::to_string(r), sum, shapes);
    }
    for (size_t k = 0; k < members.size(); ++k) {
      const int i = members[k];
      const int updater = r;
      auto finish = [&g, &dp, &options, at, parameter, i, updater, first, n](Blob* updated) {
        const Parameter& p = parameter(updater, i);
        // The server's copies are named after replica 0's.
        const int named_after = updater < n ? updater : 0;
        for (const auto& [suffix, state] : states_of(g, p.blob, options.sgd))
          map_piece(dp.checkpoint, p, named_after, state, suffix, updater == first);
        if (options.reduction != Reduction::kParameterServer || updater == n)
          g.add_swap(p.blob, updated);
        if (options.reduction != Reduction::kParameterServer) return;
        std::vector<Location> holders;
        for (int q = 0; q < n; ++q) holders.push_back(at(q));
        Graph::Placement placement(g, at(updater), Graph::kCommThread);
        const B copies =
            (B{updated} >> g.add<Distribute>(p.blob->name() + "::distribute", holders)).top();
        for (int q = 0; q < n; ++q) g.add_swap(dp.parameters[q][i].blob, copies[q]);
      };
      updates.add({parameter(r, i), pieces[k], r == first, finish});
    }
  }
}

// Writes every sum over replicas that the replicas' layers asked for (synchronized batch norm):
// the k-th request of every replica (each builds the same graph, so they ask in the same order)
// are one sum, their partials reduced by a ring allreduce (moving data as `ring` says) named
// after replica 0's, each replica's result then written into its requested blob (a zero-copy
// reshape).
void reduce_replica_sums(Graph& g, const std::vector<Graph::ReplicaSums::Request>& requests, int n,
                         const RingOptions& ring) {
  std::vector<std::vector<const Graph::ReplicaSums::Request*>> by_replica(n);
  for (const Graph::ReplicaSums::Request& request : requests) {
    CHECK(request.replica >= 0 && request.replica < n) << request.partial->name();
    by_replica[request.replica].push_back(&request);
  }
  for (int r = 1; r < n; ++r)
    require(by_replica[r].size() == by_replica[0].size(), "data parallel: replica ", r,
            " asks for ", by_replica[r].size(), " sums over the replicas, replica 0 for ",
            by_replica[0].size(), "; build the same graph in every replica");
  for (size_t k = 0; k < by_replica[0].size(); ++k) {
    const Blob* first = by_replica[0][k]->partial;
    std::vector<Blob*> parts;
    for (int r = 0; r < n; ++r) {
      Blob* partial = by_replica[r][k]->partial;
      require(partial->shape() == first->shape(), "data parallel: '", partial->name(),
              "' of shape ", partial->shape(), " is summed over the replicas with '", first->name(),
              "' of shape ", first->shape(), "; build the same graph in every replica");
      parts.push_back(partial);
    }
    const std::vector<Blob*> sums =
        ring_allreduce(g, single_device_name(first->name(), 0) + "::replica_sum", parts, ring);
    for (int r = 0; r < n; ++r) {
      Blob* wanted = by_replica[r][k]->sum;
      Graph::Placement placement(g, wanted->location(), Graph::kCommThread);
      Graph::Scope scope(g, wanted->name(), true);
      Op* op = g.add_op("write", "reshape", Attrs().set("shape", wanted->shape().dims()));
      g.set_inputs(op, {sums[r]});
      g.set_outputs(op, {wanted});
    }
  }
}

// A parameter server at a location of its own (the paper's layout: GPU replicas, the server on
// a CPU) keeps the master weights, "server::<replica 0's name>": loaded and initialized as
// every replica's weights are, updated there, and sent to the replicas after each update.
void add_server_parameters(Graph& g, DataParallelGraph& dp, Location server) {
  Graph::Scope scope(g, "server", true);
  Graph::Placement placement(g, server, Graph::kCommThread);
  for (const Parameter& replica_parameter : dp.parameters[0]) {
    Parameter master = replica_parameter;
    master.blob = g.add_blob(replica_parameter.blob->name(), replica_parameter.blob->shape());
    map_piece(dp.checkpoint, master, 0, master.blob, "", false);
    dp.server_parameters.push_back(master);
  }
}

// Every parameter and state of the graph is in the map (an internal invariant).
void check_checkpoint_map(const Graph& g, const CheckpointMap& map) {
  std::set<const Blob*> mapped;
  for (const StoredTensor& t : map)
    for (const TensorPiece& piece : t.loaded_into) mapped.insert(piece.blob);
  for (const auto* list : {&g.parameters(), &g.states()})
    for (const Parameter& p : *list)
      CHECK(mapped.count(p.blob)) << p.blob->name() << " is missing from the checkpoint map";
}

}  // namespace

DataParallelGraph build_data_parallel(Graph& g, const std::vector<Location>& locations,
                                      const ReplicaBuilder& build,
                                      const DataParallelOptions& options) {
  require(!locations.empty(), "data parallel: no locations given");
  require(std::set<Location>(locations.begin(), locations.end()).size() == locations.size(),
          "data parallel: a location is listed twice; give one location per replica");
  check_sgd_options(options.sgd);
  require(options.clip_norm >= 0, "data parallel: clip_norm must be non-negative, got ",
          options.clip_norm);
  const int n = static_cast<int>(locations.size());
  // kParameterServer: the server's replica, or n for a server at a location of its own.
  const int server = static_cast<int>(
      std::find(locations.begin(), locations.end(), options.server) - locations.begin());
  DataParallelGraph dp;
  dp.locations = locations;
  // Sums over replicas asked for while the replicas and their gradients are built.
  std::optional<Graph::ReplicaSums> replica_sums;
  if (options.sync_batch_norm && n > 1) replica_sums.emplace(g);
  std::vector<std::vector<Parameter>> replica_states;  // registered while building each replica
  for (int r = 0; r < n; ++r) {
    Graph::Scope scope(g, "replica" + std::to_string(r));
    Graph::Placement placement(g, locations[r]);
    if (replica_sums) replica_sums->set_replica(r);
    const size_t before = g.parameters().size();
    const size_t states_before = g.states().size();
    dp.replicas.push_back(build(g, r, n));
    replica_states.emplace_back(g.states().begin() + states_before, g.states().end());
    require(replica_states.back().size() == replica_states.front().size(),
            "data parallel: replica ", r, " has ", replica_states.back().size(),
            " states, replica 0 has ", replica_states.front().size());
    require(dp.replicas.back().loss != nullptr, "data parallel: replica ", r, " has no loss");
    dp.parameters.emplace_back(g.parameters().begin() + before, g.parameters().end());
    const auto& mine = dp.parameters.back();
    const auto& first = dp.parameters.front();
    require(mine.size() == first.size(), "data parallel: replica ", r, " has ", mine.size(),
            " parameters, replica 0 has ", first.size());
    for (size_t i = 0; i < mine.size(); ++i)
      require(mine[i].blob->shape() == first[i].blob->shape(), "data parallel: parameter '",
              mine[i].blob->name(), "' has shape ", mine[i].blob->shape(), ", replica 0's '",
              first[i].blob->name(), "' has ", first[i].blob->shape());
  }
  // Weights and replica states (e.g. running statistics) are saved from replica 0.
  for (const auto* per_replica : {&dp.parameters, &replica_states})
    for (size_t i = 0; i < per_replica->front().size(); ++i)
      for (int r = 0; r < n; ++r) {
        const Parameter& p = (*per_replica)[r][i];
        map_piece(dp.checkpoint, p, r, p.blob, "", r == 0);
      }
  if (options.reduction == Reduction::kParameterServer && server == n)
    add_server_parameters(g, dp, options.server);
  // Gradients of each replica's loss / N, so the reduced sum is the average gradient.
  std::vector<Gradients> grads;
  for (int r = 0; r < n; ++r) {
    std::vector<Blob*> weights;
    for (const Parameter& p : dp.parameters[r]) weights.push_back(p.blob);
    if (replica_sums) replica_sums->set_replica(r);
    grads.push_back(backward(g, dp.replicas[r].loss, weights, 1.0 / n));
  }
  // What follows moves gradients and scalars between replicas (the updates inside are the
  // optimizer's).
  Graph::RoleScope role(g, OpRole::kCommunication);
  if (replica_sums) {
    const std::vector<Graph::ReplicaSums::Request> requests = replica_sums->requests();
    replica_sums.reset();
    reduce_replica_sums(g, requests, n, options.ring);
  }
  // Last parameters first: the backward pass produces their gradients first, and creation
  // order is the tie-break that orders collectives (mpi_allreduce) on every rank.
  std::vector<int> order;
  std::vector<int64_t> bytes;
  for (int i = static_cast<int>(dp.parameters[0].size()); i-- > 0;) {
    if (!grads[0].has(dp.parameters[0][i].blob)) continue;
    order.push_back(i);
    bytes.push_back(dp.parameters[0][i].blob->shape().count() *
                    static_cast<int64_t>(sizeof(float)));
  }
  // One replica has nothing to reduce: fusing would only add ops. Buckets join neighbours kept
  // at one location only: each run of such neighbours is planned alone.
  std::vector<std::vector<int>> buckets;
  for (size_t start = 0, end = 0; start < order.size(); start = end) {
    const Location where = dp.parameters[0][order[start]].blob->location();
    while (end < order.size() && dp.parameters[0][order[end]].blob->location() == where) ++end;
    const std::vector<int64_t> run(bytes.begin() + start, bytes.begin() + end);
    for (std::vector<int> bucket : plan_buckets(run, n > 1 ? options.bucket_bytes : 0)) {
      for (int& k : bucket) k = order[start + k];
      buckets.push_back(std::move(bucket));
    }
  }
  Updates updates(g, dp, options);
  for (const std::vector<int>& members : buckets) {
    // A piece of columns (a layer split by inputs) has no contiguous chunks to shard.
    if (members.size() == 1 && options.reduction == Reduction::kRing && n > 1 &&
        dp.parameters[0][members[0]].row_stride == 0)
      reduce_sharded(g, dp, grads, members[0], options, updates);
    else
      reduce_together(g, dp, grads, members, server, options, updates);
  }
  updates.build_clipped();
  std::vector<Blob*> losses, accuracies;
  for (const ReplicaOutputs& out : dp.replicas) {
    losses.push_back(out.loss);
    if (out.accuracy) accuracies.push_back(out.accuracy);
  }
  dp.loss = replica_mean(g, "loss", losses, locations);
  if (accuracies.size() == losses.size())
    dp.accuracy = replica_mean(g, "accuracy", accuracies, locations);
  check_checkpoint_map(g, dp.checkpoint);
  return dp;
}

}  // namespace purine
