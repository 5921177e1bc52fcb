// bench_conv_layers: every distinct convolution of a model's training graph timed alone, per
// direction (forward, data gradient, weight gradient) and per kernel choice, interleaved round
// by round in one process:
//   forward, data gradient: the op as training runs it (engine auto), oneDNN, im2col;
//   weight gradient: as training runs it (engine auto), one oneDNN primitive over all threads
//   (deterministic=0, bits depending on the thread count), oneDNN in fixed batch chunks of
//   one-thread primitives (deterministic=1, bits independent of the thread count: auto's choice
//   on larger planes), im2col.
//
//   bench_conv_layers [--model=googlenet] [--batch=64] [--threads=2] [--reps=10] [--rounds=3]
//                     [--directions=forward,data,weight]
//
// Prints per layer and direction the median milliseconds per call of each choice and the
// GFLOP/s of the one training uses, then per direction the totals over the graph (a layer
// counted as often as the graph has it): where a model's convolution time goes, and what
// another kernel choice would give.
#include <gflags/gflags.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <variant>
#include <vector>

#include "base/error.hpp"
#include "base/rng.hpp"
#include "base/tensor.hpp"
#include "operators/conv.hpp"
#include "operators/registry.hpp"
#include "tools/bench/model_ops.hpp"
#include "train/options.hpp"

DEFINE_string(model, "googlenet", "model whose convolutions are timed");
DEFINE_string(data, "/usr/share/datasets/fashion-mnist", "IDX data directory (its image size)");
DEFINE_int32(batch, 64, "images per iteration");
DEFINE_int32(threads, 2, "OpenMP threads of the calling thread");
DEFINE_int32(reps, 10, "calls per timed round");
DEFINE_int32(rounds, 3, "timed rounds per choice (the median is printed)");
DEFINE_string(directions, "forward,data,weight", "which passes to time, comma-separated");

namespace {

using purine::Attrs;
using purine::Shape;
using purine::Tensor;
using Clock = std::chrono::steady_clock;

struct Choice {
  const char* label;
  Attrs overrides;  // set on top of the graph op's attributes
};

struct Layer {
  std::string name;       // the first op of the graph with this geometry
  std::string type;       // conv / conv_bias_relu, conv_grad_data, conv_grad_weight
  Attrs attrs;            // the graph op's attributes (stride, pad, ...)
  std::vector<Shape> in;  // the op's input shapes
  Shape out;
  double flops = 0;  // of one call, as the op counts them (Operator::cost)
  int count = 0;     // ops of the graph with this geometry
};

const char* direction_of(const std::string& type) {
  if (type == "conv" || type == "conv_bias_relu") return "forward";
  if (type == "conv_grad_data") return "data";
  if (type == "conv_grad_weight") return "weight";
  return nullptr;
}

std::vector<Choice> choices_for(const std::string& direction) {
  std::vector<Choice> choices{{"training", Attrs()}};
  if (direction == "weight") {
    choices.push_back({"onednn-1", Attrs().set("engine", "onednn").set("deterministic", 0)});
    choices.push_back({"onednn-ch", Attrs().set("engine", "onednn").set("deterministic", 1)});
  } else {
    choices.push_back({"onednn", Attrs().set("engine", "onednn")});
  }
  choices.push_back({"winograd", Attrs().set("engine", "winograd")});
  choices.push_back({"im2col", Attrs().set("engine", "im2col")});
  return choices;
}

Tensor random_tensor(const Shape& shape, purine::Rng& rng) {
  Tensor t(shape);
  for (int64_t i = 0; i < t.count(); ++i) t.mutable_data()[i] = rng.uniform(-1.0f, 1.0f);
  return t;
}

// The graph's convolutions, one entry per distinct (type, attributes, shapes), in graph order.
std::vector<Layer> conv_layers(const purine::Graph& graph) {
  std::vector<Layer> layers;
  for (const purine::bench::OpGeometry& g : purine::bench::op_geometries(
           graph, [](const std::string& type) { return direction_of(type) != nullptr; })) {
    const purine::Op& op = *g.op;
    layers.push_back(Layer{op.name(), op.type(), op.attrs(), g.in, g.out,
                           op.kernel().cost(g.in, {g.out}).flops, g.count});
  }
  return layers;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("a model's convolutions timed alone, per direction and kernel choice");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  try {
    const auto trainer =
        purine::bench::model_trainer(FLAGS_model, FLAGS_data, FLAGS_batch, FLAGS_threads);
    const std::vector<Layer> layers = conv_layers(trainer->training_graph());
    const std::vector<std::string> directions =
        purine::parse_name_list(FLAGS_directions, "--directions");
    for (const std::string& d : directions)
      purine::require(d == "forward" || d == "data" || d == "weight", "--directions: '", d,
                      "' is not forward, data or weight");
    omp_set_num_threads(FLAGS_threads);
    std::printf("%s, batch %d, %d threads, median of %d rounds x %d calls, ms per call\n",
                FLAGS_model.c_str(), FLAGS_batch, FLAGS_threads, FLAGS_rounds, FLAGS_reps);
    for (const std::string& direction : directions) {
      const std::vector<Choice> choices = choices_for(direction);
      std::printf("\n%s\n%-34s %4s %-20s", direction.c_str(), "layer", "ops", "x shape");
      for (const Choice& c : choices) std::printf(" %10s", c.label);
      std::printf(" %8s  training kernel\n", "GFLOP/s");
      std::vector<double> totals(choices.size(), 0.0);
      double total_flops = 0;
      for (const Layer& layer : layers) {
        if (direction != direction_of(layer.type)) continue;
        purine::Rng rng(1);
        std::vector<Tensor> inputs;
        for (const Shape& s : layer.in) inputs.push_back(random_tensor(s, rng));
        Tensor output(layer.out);
        std::vector<const Tensor*> in;
        for (const Tensor& t : inputs) in.push_back(&t);
        std::vector<std::unique_ptr<purine::Operator>> ops;
        for (const Choice& c : choices) {
          Attrs attrs = layer.attrs;
          for (const auto& [key, value] : c.overrides.values())
            std::visit([&, &key = key](const auto& v) { attrs.set(key, v); }, value);
          ops.push_back(purine::OperatorRegistry::create(layer.type, attrs));
        }
        std::vector<std::vector<double>> ms(choices.size());
        purine::OpContext context;
        for (int round = -1; round < FLAGS_rounds; ++round) {  // round -1 warms up
          for (size_t v = 0; v < ops.size(); ++v) {
            const Clock::time_point start = Clock::now();
            for (int i = 0; i < FLAGS_reps; ++i) ops[v]->compute(in, {&output}, context);
            const double elapsed =
                std::chrono::duration<double, std::milli>(Clock::now() - start).count();
            if (round >= 0) ms[v].push_back(elapsed / FLAGS_reps);
          }
        }
        const Shape& x =
            direction == "forward" ? layer.in[0] : layer.in[layer.type == "conv_grad_data" ? 2 : 1];
        std::printf("%-34s %4d %-20s",
                    purine::bench::short_op_name(layer.name, FLAGS_model, 34).c_str(), layer.count,
                    purine::str(x).c_str());
        for (size_t v = 0; v < ms.size(); ++v) {
          std::sort(ms[v].begin(), ms[v].end());
          const double median = ms[v][ms[v].size() / 2];
          totals[v] += median * layer.count;
          std::printf(" %10.3f", median);
        }
        const double training_ms = ms[0][ms[0].size() / 2];
        total_flops += layer.flops * layer.count;
        const auto* conv = dynamic_cast<const purine::ConvOpBase*>(ops[0].get());
        std::printf(" %8.1f  %s\n", layer.flops / training_ms / 1e6,
                    conv ? conv->kernel_name().c_str() : "");
      }
      std::printf("%-34s %4s %-20s", "total", "", "");
      for (double t : totals) std::printf(" %10.3f", t);
      std::printf(" %8.1f\n", totals.empty() ? 0.0 : total_flops / totals[0] / 1e6);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
