#include "base/error.hpp"
#include "graphs/layers.hpp"

namespace purine {

BatchNormLayer::BatchNormLayer(Graph& graph, const std::string& name, Options options)
    : Composite(graph, name), options_(options) {
  require(options_.eps > 0, "batch norm layer '", this->name(), "': eps must be positive");
  require(options_.momentum >= 0 && options_.momentum < 1, "batch norm layer '", this->name(),
          "': momentum must be in [0, 1), got ", options_.momentum);
}

void BatchNormLayer::setup() {
  require_bottoms(1);
  Blob* x = bottom_[0];
  require(x->shape().ndim() == 2 || x->shape().ndim() == 4, "batch norm layer '", name(),
          "': input '", x->name(), "' has shape ", x->shape(), "; expected [N,C] or [N,C,H,W]");
  const Shape c{x->shape()[1]};
  Blob* gamma = make_parameter("gamma", c, "fill_constant", Attrs().set("value", 1.0), 0.0);
  Blob* beta = make_parameter("beta", c, "fill_constant", Attrs().set("value", 0.0), 0.0);
  // Running statistics: state, not trained; mean starts at 0 and variance at 1. Shared by the
  // copies of a model that share its parameters (micro-batches).
  Blob* mean = make_state("running_mean", c, 0.0);
  Blob* var = make_state("running_var", c, 1.0);
  // In training, the statistics as the copies set up before this one left them: this copy's
  // update follows theirs (micro-batch m reads what m - 1 wrote), and its result is swapped in
  // after the run unless a later copy's is. Evaluation reads the statistics themselves.
  Blob* mean_before = mean;
  Blob* var_before = var;
  if (options_.training) {
    Blob* chained_mean = graph().swapped_with(mean);
    Blob* chained_var = graph().swapped_with(var);
    require((chained_mean == nullptr) == (chained_var == nullptr), "batch norm layer '", name(),
            "': one of its running statistics is updated by an earlier copy, the other not");
    if (chained_mean) {
      mean_before = chained_mean;
      var_before = chained_var;
    }
  }
  Blob* y = top_or_new(0, "top", x->shape());
  Blob* saved_mean = make_blob("saved_mean", c);
  Blob* saved_inv_std = make_blob("saved_inv_std", c);
  Blob* new_mean = make_blob("new_running_mean", c);
  Blob* new_var = make_blob("new_running_var", c);
  Attrs attrs;
  attrs.set("eps", options_.eps).set("momentum", options_.momentum);
  if (options_.training && graph().sums_over_replicas()) {
    // Synchronized: the statistics of every replica's batch, from per-channel sums added over
    // the replicas (two passes, as batch_norm: the mean, then the squares about it); the
    // gradient adds its sums over the replicas too (operators/sync_batch_norm.hpp).
    Blob* sums = graph().replica_sum(make_op("sums", "batch_norm_sums", {}, {x})[0]);
    Blob* squares =
        graph().replica_sum(make_op("square_sums", "batch_norm_square_sums", {}, {x, sums})[0]);
    make_op("bn", "sync_batch_norm", attrs,
            {x, gamma, beta, mean_before, var_before, sums, squares},
            {y, saved_mean, saved_inv_std, new_mean, new_var});
  } else {
    attrs.set("mode", options_.training ? "train" : "test");
    make_op("bn", "batch_norm", attrs, {x, gamma, beta, mean_before, var_before},
            {y, saved_mean, saved_inv_std, new_mean, new_var});
  }
  if (options_.training && mean_before != mean) {
    graph().replace_swap(mean, new_mean);
    graph().replace_swap(var, new_var);
  } else if (options_.training) {
    graph().add_swap(mean, new_mean);
    graph().add_swap(var, new_var);
  }
}

}  // namespace purine
