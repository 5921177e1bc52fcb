// What the per-op benchmarks of a model share (bench_conv_layers, bench_pool_layers): the
// training graph `purine train` builds for the model, its ops of some types with each geometry
// once, and their names without the replica and model scopes.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "purine/graph.hpp"
#include "train/options.hpp"
#include "train/trainer.hpp"

namespace purine::bench {

// One geometry of the graph's ops: the first op with it, and how many ops share it.
struct OpGeometry {
  const Op* op = nullptr;
  std::vector<Shape> in;  // its input shapes
  Shape out;              // its first output's shape
  int count = 0;
};

// The trainer of `model` on the data set at `data` (its image size), without evaluation; its
// training_graph() holds the ops.
inline std::unique_ptr<Trainer> model_trainer(const std::string& model, const std::string& data,
                                              int batch, int threads) {
  TrainOptions o;
  o.model = model;
  o.data_dir = data;
  o.batch = batch;
  o.threads = threads;
  o.evaluate = false;
  return std::make_unique<Trainer>(o);
}

// The graph's ops whose type `keep` accepts, one per distinct (type, attributes, input shapes),
// in graph order.
inline std::vector<OpGeometry> op_geometries(const Graph& graph,
                                             const std::function<bool(const std::string&)>& keep) {
  std::vector<OpGeometry> found;
  std::map<std::string, size_t> index;
  for (const auto& op : graph.ops()) {
    if (!keep(op->type())) continue;
    OpGeometry g{op.get(), {}, op->outputs()[0]->shape(), 0};
    std::string key = op->type() + " " + op->attrs().to_string();
    for (const auto* blob : op->inputs()) {
      g.in.push_back(blob->shape());
      key += str(" ", blob->shape());
    }
    auto [it, fresh] = index.emplace(key, found.size());
    if (fresh) found.push_back(g);
    ++found[it->second].count;
  }
  return found;
}

// `name` without its replica and model scopes, cut to `width` characters.
inline std::string short_op_name(const std::string& name, const std::string& model, size_t width) {
  std::string s = name;
  for (const std::string& prefix : {std::string("replica0::"), model + "::"})
    if (s.rfind(prefix, 0) == 0) s = s.substr(prefix.size());
  return s.size() > width ? s.substr(0, width) : s;
}

}  // namespace purine::bench
