#include "graphs/pipeline.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "base/error.hpp"
#include "graphs/zero_bubble_interleaved.hpp"
#include "purine/autodiff.hpp"

namespace purine {

namespace {

// Adds to `scratch` the backward pass of a loss on the model's output, so that each layer's
// backward ops (named after its forward ops: purine/autodiff.hpp) can be costed: the output is
// the unread output of the last op that has one that is a scalar (a loss) or [N, classes]
// (logits, then given a softmax cross-entropy against labels of zeros). False, adding nothing,
// where there is none.
bool add_backward_pass(Graph& scratch) {
  Blob* loss = nullptr;
  for (auto op = scratch.ops().rbegin(); op != scratch.ops().rend() && !loss; ++op)
    for (Blob* b : (*op)->outputs())
      if (b->readers().empty() && (b->shape().count() == 1 || b->shape().dims().size() == 2)) {
        loss = b;
        break;
      }
  if (!loss) return false;
  if (loss->shape().count() != 1)
    loss = scratch.apply("cost_probe", "softmax_cross_entropy", {},
                         {loss, scratch.add_blob("cost_probe_labels", {loss->shape()[0]})})[0];
  std::vector<Blob*> weights;
  for (const Parameter& p : scratch.parameters()) weights.push_back(p.blob);
  backward(scratch, loss, weights);
  return true;
}

}  // namespace

std::vector<ModelLayer> model_layers(const std::function<void(Graph&)>& build) {
  Graph scratch("layers");
  build(scratch);
  scratch.validate();  // sets every composite up, so that its parameters exist
  // The activations that cross each place a cut may take: forward ops only.
  std::vector<const Op*> forward_ops;
  for (const auto& op : scratch.ops()) forward_ops.push_back(op.get());
  // Without a backward pass to cost, the backward is taken as twice the forward.
  const double forward_weight = add_backward_pass(scratch) ? 1 : 3;
  std::vector<ModelLayer> layers;
  std::vector<size_t> first_unit;  // per layer: its first unit (its parts, then the rest)
  size_t units = 0;
  for (const std::string& name : scratch.layer_names()) {
    layers.push_back({name, 0});
    for (const std::string& part : scratch.part_names(name)) layers.back().parts.push_back({part});
    first_unit.push_back(units);
    units += layers.back().parts.size() + 1;
  }
  // The layer whose scope holds a vertex of this name, and its part that does (parts.size():
  // none of them); {-1, 0} when no layer does.
  auto locate = [&layers](const std::string& name) -> std::pair<int, size_t> {
    auto holds = [&name](const ModelLayer& l) { return name.rfind(l.name + "::", 0) == 0; };
    for (size_t i = 0; i < layers.size(); ++i) {
      if (!holds(layers[i])) continue;
      const std::vector<ModelLayer>& parts = layers[i].parts;
      return {static_cast<int>(i), std::find_if(parts.begin(), parts.end(), holds) - parts.begin()};
    }
    return {-1, 0};
  };
  auto add_to = [&](const std::string& name, int64_t parameters, double cost) {
    const auto [i, j] = locate(name);
    if (i < 0) return;
    layers[i].parameters += parameters;
    layers[i].cost += cost;
    if (j < layers[i].parts.size())
      layers[i].parts[j].parameters += parameters, layers[i].parts[j].cost += cost;
  };
  // A step's update reads the weight, its gradient and history and writes two: 5 floats.
  for (const Parameter& p : scratch.parameters()) {
    const int64_t count = p.blob->shape().count();
    add_to(p.blob->name(), count, kFlopsPerByte * 5 * sizeof(float) * count);
  }
  auto shapes = [](const std::vector<Blob*>& blobs) {
    std::vector<Shape> out;
    for (const Blob* b : blobs) out.push_back(b->shape());
    return out;
  };
  for (const auto& op : scratch.ops()) {
    const OpCost c = op->kernel().cost(shapes(op->inputs()), shapes(op->outputs()));
    add_to(op->name(), 0,
           (op->role() == OpRole::kBackward ? 1 : forward_weight) *
               std::max(c.flops, kFlopsPerByte * c.bytes));
  }
  // Bytes crossing the place after each unit: a blob written in one unit and read in a later
  // one crosses every place between them.
  auto unit_of = [&](const Op* op) -> std::optional<size_t> {
    const auto [i, j] = locate(op->name());
    if (i < 0) return std::nullopt;
    return first_unit[i] + j;
  };
  std::vector<double> crossing(units + 1, 0);  // a difference array over the places
  std::set<const Blob*> counted;
  for (const Op* op : forward_ops) {
    const std::optional<size_t> from = unit_of(op);
    if (!from) continue;
    for (const Blob* blob : op->outputs()) {
      if (!counted.insert(blob).second) continue;
      size_t last = *from;
      for (const Op* reader : blob->readers())
        if (const std::optional<size_t> to = unit_of(reader)) last = std::max(last, *to);
      const double bytes = static_cast<double>(sizeof(float) * blob->shape().count());
      crossing[*from] += bytes;
      crossing[last] -= bytes;
    }
  }
  for (size_t u = 1; u <= units; ++u) crossing[u] += crossing[u - 1];
  for (size_t i = 0; i < layers.size(); ++i) {
    for (size_t j = 0; j < layers[i].parts.size(); ++j)
      layers[i].parts[j].bytes_after = crossing[first_unit[i] + j];
    layers[i].bytes_after = crossing[first_unit[i] + layers[i].parts.size()];
  }
  return layers;
}

namespace {

// The sum of units [i, j) of `costs`, with `after[u]` for a cut after unit u at either end.
class RunCosts {
 public:
  RunCosts(const std::vector<double>& costs, const std::vector<double>& after)
      : after_(after), prefix_(costs.size() + 1, 0) {
    for (size_t i = 0; i < costs.size(); ++i) prefix_[i + 1] = prefix_[i] + costs[i];
  }
  size_t units() const { return after_.size(); }
  double operator()(size_t i, size_t j) const {
    return prefix_[j] - prefix_[i] + (i > 0 ? after_[i - 1] : 0) +
           (j < units() ? after_[j - 1] : 0);
  }

 private:
  const std::vector<double>& after_;
  std::vector<double> prefix_;
};

// Cuts `costs` (one per unit, in order) into `parts` consecutive non-empty runs whose largest
// sum is least and, among those, whose sums are most even (least sum of squares); returns the
// first unit of each run. A run's sum includes `after[u]` for a cut after unit u at either of
// its ends. Ties go to the cut that gives earlier runs more units.
std::vector<size_t> balanced_cut(const RunCosts& run_sum, int parts) {
  const size_t n = run_sum.units();
  const double kNone = std::numeric_limits<double>::infinity();
  // best[k][j]: the least objective of units [0, j) cut into k runs, `combine` adding a run's
  // sum to it and `allowed` saying which runs may be; from[k][j]: where the last run starts.
  std::vector<std::vector<double>> best;
  std::vector<std::vector<size_t>> from;
  auto solve = [&](auto combine, auto allowed) {
    best.assign(parts + 1, std::vector<double>(n + 1, kNone));
    from.assign(parts + 1, std::vector<size_t>(n + 1, 0));
    best[0][0] = 0;
    for (int k = 1; k <= parts; ++k)
      for (size_t j = k; j <= n; ++j)
        for (size_t i = j; i-- > static_cast<size_t>(k - 1);) {
          const double sum = run_sum(i, j);
          if (best[k - 1][i] == kNone || !allowed(sum)) continue;
          const double value = combine(best[k - 1][i], sum);
          if (value < best[k][j]) best[k][j] = value, from[k][j] = i;
        }
  };
  solve([](double worst, double sum) { return std::max(worst, sum); }, [](double) { return true; });
  const double limit = best[parts][n] * (1 + 1e-12);
  solve([](double squares, double sum) { return squares + sum * sum; },
        [limit](double sum) { return sum <= limit; });
  std::vector<size_t> starts(parts);
  for (size_t k = parts, j = n; k > 0; --k) j = starts[k - 1] = from[k][j];
  return starts;
}

// Improves the cut `starts` (first units of runs) for runs dealt round run.locations, run r
// at location r % locations: the cut balanced_cut() makes evens the runs, but under an
// interleaved schedule a location works through all of its runs for every micro-batch, and a
// costly run holds up the next location's runs. Moves one cut, or the two around a run, by a
// unit while that shortens the schedule's time (ties: more even locations, then more even
// runs), from the even cut and from perturbed ones.
std::vector<size_t> interleaved_cut(const RunCosts& run_sum, std::vector<size_t> starts,
                                    const PipelineRun& run) {
  const size_t n = run_sum.units(), runs = starts.size();
  const int locations = run.locations;
  auto score = [&](const std::vector<size_t>& cut) {
    std::vector<double> costs(runs), load(locations, 0);
    double run_squares = 0, load_squares = 0;
    for (size_t r = 0; r < runs; ++r) {
      costs[r] = run_sum(cut[r], r + 1 < runs ? cut[r + 1] : n);
      load[r % locations] += costs[r];
      run_squares += costs[r] * costs[r];
    }
    for (double l : load) load_squares += l * l;
    return std::make_tuple(pipeline_time(costs, run), load_squares, run_squares);
  };
  // Local search from `starts`: its best cut and score.
  auto descend = [&](std::vector<size_t> starts) {
    auto best = score(starts);
    for (bool improved = true; improved;) {
      improved = false;
      const std::vector<size_t> from = starts;
      auto consider = [&](const std::vector<size_t>& cut) {
        const auto value = score(cut);
        if (value < best) best = value, starts = cut, improved = true;
      };
      for (size_t c = 1; c < runs; ++c) {
        // One cut anywhere between its neighbours.
        std::vector<size_t> cut = from;
        for (cut[c] = from[c - 1] + 1; cut[c] < (c + 1 < runs ? from[c + 1] : n); ++cut[c])
          if (cut[c] != from[c]) consider(cut);
        // The two cuts around a run, by one unit.
        for (int step : {-1, 1}) {
          if (c + 1 >= runs) break;
          cut = from;
          cut[c] += step, cut[c + 1] += step;
          if (cut[c] > cut[c - 1] && cut[c + 1] < (c + 2 < runs ? cut[c + 2] : n)) consider(cut);
        }
      }
    }
    return std::make_pair(starts, best);
  };
  // The search stops where no single move helps; it restarts from the even cut with every cut
  // moved by up to 3 units, the same moves in every run (a fixed seed). 16 restarts moved
  // GoogLeNet's simulated hybrid (3 GPUs, 2 stages each, 12 micro-batches) from 263.0 to 277.7
  // img/s; 64 found no better. On 20 random 10-layer models cut 4 ways over 2 locations it finds
  // the best cut by pipeline_time() for all 20, 15 without restarts
  // (tests/graphs/test_pipeline.cpp).
  constexpr int kRestarts = 16;
  auto result = descend(starts);
  uint32_t seed = 12345;
  for (int r = 0; r < kRestarts; ++r) {
    std::vector<size_t> cut = starts;
    for (size_t c = 1; c < runs; ++c) {
      seed = seed * 1664525u + 1013904223u;  // a linear congruential step
      const int offset = static_cast<int>((seed >> 16) % 7) - 3;
      cut[c] = static_cast<size_t>(std::max<long>(1, static_cast<long>(cut[c]) + offset));
    }
    bool valid = cut[runs - 1] < n;
    for (size_t c = 1; c < runs; ++c) valid = valid && cut[c] > cut[c - 1];
    if (!valid) continue;
    auto candidate = descend(cut);
    if (candidate.second < result.second) result = candidate;
  }
  return result.first;
}

bool costed(const std::vector<ModelLayer>& layers) {
  return std::any_of(layers.begin(), layers.end(), [](const ModelLayer& l) { return l.cost > 0; });
}

size_t count_parametric(const std::vector<ModelLayer>& layers) {
  return std::count_if(layers.begin(), layers.end(),
                       [](const ModelLayer& l) { return l.parameters > 0; });
}

// The units a cut falls between: a parametric layer and the parameter-free ones after it (those
// before the first join the first unit). `unit_of` per layer; `costs` per unit, 1 each where no
// layer has a cost; `after` per unit: what a cut after it costs each of the two stages (the
// bytes crossing it, forward and back, over a link `link_slowdown` times slower than memory).
// Needs a parametric layer.
struct Units {
  std::vector<double> costs, after;
  std::vector<size_t> unit_of;
};
Units units_of(const std::vector<ModelLayer>& layers, double link_slowdown) {
  const bool with_costs = costed(layers);
  const size_t count = count_parametric(layers);
  Units units{std::vector<double>(count, with_costs ? 0 : 1), std::vector<double>(count, 0),
              std::vector<size_t>(layers.size(), 0)};
  bool first = true;
  for (size_t i = 0, unit = 0; i < layers.size(); ++i) {
    if (layers[i].parameters > 0 && !std::exchange(first, false)) ++unit;
    units.unit_of[i] = unit;
    if (!with_costs) continue;
    units.costs[unit] += layers[i].cost;
    units.after[unit] = 2 * kFlopsPerByte * link_slowdown * layers[i].bytes_after;
  }
  return units;
}

}  // namespace

namespace {

// Whether the op named `name` belongs to the layer or part named `scope`: `scope` followed by
// "::" at the start of `name` or after a "::" of it.
bool in_scope(const std::string& name, const std::string& scope) {
  const std::string prefix = scope + "::";
  for (size_t at = name.find(prefix); at != std::string::npos; at = name.find(prefix, at + 1))
    if (starts_scope(name, at)) return true;
  return false;
}

}  // namespace

int measure_layers(std::vector<ModelLayer>& layers, const std::map<std::string, double>& seconds) {
  std::vector<double> measured(layers.size(), 0);
  std::vector<std::vector<double>> part_measured(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) part_measured[i].assign(layers[i].parts.size(), 0);
  for (const auto& [name, time] : seconds)
    for (size_t i = 0; i < layers.size(); ++i) {
      if (!in_scope(name, layers[i].name)) continue;
      measured[i] += time;
      for (size_t j = 0; j < layers[i].parts.size(); ++j)
        if (in_scope(name, layers[i].parts[j].name)) part_measured[i][j] += time;
      break;
    }
  double roofline = 0, traced = 0;
  int count = 0;
  for (size_t i = 0; i < layers.size(); ++i)
    if (measured[i] > 0) roofline += layers[i].cost, traced += measured[i], ++count;
  if (count == 0 || roofline <= 0) return 0;
  const double scale = roofline / traced;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (measured[i] <= 0) continue;
    layers[i].cost = scale * measured[i];
    for (size_t j = 0; j < layers[i].parts.size(); ++j)
      layers[i].parts[j].cost = scale * part_measured[i][j];
  }
  return count;
}

std::vector<ModelLayer> stage_units(const std::vector<ModelLayer>& layers, StageCut cut) {
  if (cut == StageCut::kLayers) return layers;
  std::vector<ModelLayer> parts;
  for (const ModelLayer& layer : layers) {
    if (layer.parts.empty()) {
      parts.push_back(layer);
      continue;
    }
    ModelLayer rest{layer.name, layer.parameters, layer.cost, {}, layer.bytes_after};
    for (const ModelLayer& part : layer.parts) {
      parts.push_back(part);
      rest.parameters -= part.parameters;
      rest.cost -= part.cost;
    }
    rest.cost = std::max(rest.cost, 0.0);
    parts.push_back(rest);
  }
  return parts;
}

double pipeline_time(const std::vector<double>& costs, const PipelineRun& run) {
  const int stages = static_cast<int>(costs.size());
  const int locations = run.locations > 0 ? run.locations : stages;
  require(stages > 0 && stages % locations == 0, "pipeline_time: ", stages,
          " stages do not go round ", locations, " locations evenly");
  const int chunks = stages / locations;
  const int m = run.micro_batches;
  // Interleaved ZB-H1's orders come from a run of these costs: its length.
  if (run.schedule == PipelineSchedule::kZBH1 && chunks > 1)
    return zero_bubble_interleaved(locations, m, chunks, costs).length;
  const double kNone = -1;
  std::vector<double> forward_done(static_cast<size_t>(m) * stages, kNone);
  std::vector<double> backward_done(forward_done.size(), kNone);
  std::vector<std::vector<PipelineStep>> orders;
  for (int l = 0; l < locations; ++l)
    orders.push_back(schedule_order(run.schedule, l, locations, m, chunks));
  // Split (ZB-H1), a backward's two thirds are its input gradients and its weight gradients.
  const bool split = run.schedule == PipelineSchedule::kZBH1;
  std::vector<size_t> next(locations, 0);
  std::vector<double> clock(locations, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int l = 0; l < locations; ++l)
      for (; next[l] < orders[l].size(); ++next[l]) {
        const PipelineStep& step = orders[l][next[l]];
        const int j = step.chunk * locations + l;
        const size_t at = static_cast<size_t>(step.micro_batch) * stages + j;
        const bool forward = step.pass == Pass::kForward;
        // A forward waits for the stage before; a backward for its forward and the gradient
        // from the stage after; a weight pass for its backward.
        double ready = forward                      ? (j == 0 ? 0 : forward_done[at - 1])
                       : step.pass == Pass::kWeight ? backward_done[at]
                                                    : forward_done[at];
        if (step.pass == Pass::kBackward && j + 1 < stages && ready != kNone)
          ready = backward_done[at + 1] == kNone ? kNone : std::max(ready, backward_done[at + 1]);
        if (ready == kNone) break;
        clock[l] = std::max(clock[l], ready) + costs[j] * (forward || split ? 1.0 / 3 : 2.0 / 3);
        if (step.pass != Pass::kWeight) (forward ? forward_done : backward_done)[at] = clock[l];
        progress = true;
      }
  }
  for (int l = 0; l < locations; ++l)
    if (next[l] < orders[l].size()) return std::numeric_limits<double>::infinity();
  return *std::max_element(clock.begin(), clock.end());
}

std::vector<int> assign_stages(const std::vector<ModelLayer>& layers, int stages,
                               const std::string& model, double link_slowdown,
                               const PipelineRun& run) {
  std::string names;
  for (const ModelLayer& layer : layers)
    if (layer.parameters > 0) names += str(names.empty() ? "" : ", ", layer.name);
  const size_t parametric = count_parametric(layers);
  require(stages >= 1, "pipeline of model '", model, "': --stages must be at least 1, got ",
          stages);
  require(static_cast<size_t>(stages) <= parametric, "pipeline of model '", model, "': ", stages,
          " stages, but it has ", parametric, " layers with parameters (", names, "); use at most ",
          parametric);
  const Units units = units_of(layers, link_slowdown);
  const RunCosts run_sum(units.costs, units.after);
  std::vector<size_t> starts = balanced_cut(run_sum, stages);
  if (run.locations > 0 && run.locations < stages) {
    require(stages % run.locations == 0, "pipeline of model '", model, "': ", stages,
            " stages do not go round ", run.locations, " locations evenly");
    starts = interleaved_cut(run_sum, std::move(starts), run);
  }
  std::vector<int> stage_of(layers.size(), 0);
  for (size_t i = 0; i < layers.size(); ++i)
    stage_of[i] = static_cast<int>(
        std::upper_bound(starts.begin(), starts.end(), units.unit_of[i]) - starts.begin() - 1);
  return stage_of;
}

double stage_link_slowdown(const std::vector<Location>& stages) {
  const bool host_copies = std::all_of(stages.begin(), stages.end(), [&](const Location& l) {
    return l.is_cpu() && l.rank == stages.front().rank;
  });
  return host_copies ? 1 : kLinkSlowdown;
}

void place_stages(Graph& graph, const std::vector<ModelLayer>& layers,
                  const std::vector<int>& stage_of, const std::vector<Location>& locations) {
  require(stage_of.size() == layers.size(), "place_stages: ", layers.size(), " layers, ",
          stage_of.size(), " stage numbers");
  require(!locations.empty(), "place_stages: no locations");
  for (size_t i = 0; i < layers.size(); ++i) {
    require(stage_of[i] >= 0, "place_stages: layer '", layers[i].name, "' is in stage ",
            stage_of[i]);
    graph.place(layers[i].name, locations[stage_of[i] % locations.size()]);
  }
}

int micro_batch_of(const Op& op) {
  const std::string& name = op.name();
  const std::string scope = "micro";
  for (size_t at = name.find(scope); at != std::string::npos; at = name.find(scope, at + 1)) {
    if (!starts_scope(name, at)) continue;
    size_t end = at + scope.size();
    while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
    if (end > at + scope.size() && name.compare(end, 2, "::") == 0)
      return std::stoi(name.substr(at + scope.size(), end - at - scope.size()));
  }
  return -1;
}

namespace {
// Whether an op of the op's own micro-batch reads one of its outputs.
bool read_in_its_micro_batch(const Op& op) {
  const int m = micro_batch_of(op);
  for (const Blob* out : op.outputs())
    for (const Op* reader : out->readers())
      if (micro_batch_of(*reader) == m) return true;
  return false;
}
}  // namespace

std::optional<Pass> pass_of(const Op& op) {
  if (micro_batch_of(op) < 0) return std::nullopt;
  const bool read = read_in_its_micro_batch(op);
  if (op.role() == OpRole::kForward) return read ? std::optional(Pass::kForward) : std::nullopt;
  return read ? Pass::kBackward : Pass::kWeight;
}

double bubble_theory(PipelineSchedule schedule, int stages, int micro_batches, int chunks) {
  const double s = stages, m = micro_batches;
  if (schedule == PipelineSchedule::kZBH1 && chunks > 1)
    return 1 - 3.0 * micro_batches * chunks /
                   zero_bubble_interleaved(stages, micro_batches, chunks).length;
  if (schedule == PipelineSchedule::kZBH1 && micro_batches > 1) return (s - 1) / (3 * m + s - 1);
  return (s - 1) / (chunks * m + s - 1);
}

namespace {

// Interleaved stages (see the header): forward step k of a location is micro-batch
// k / (S*V) * S + k % S through its chunk k / S % V; backward step k the same micro-batch
// through chunk V - 1 - k / S % V.
std::vector<PipelineStep> interleaved_order(PipelineSchedule schedule, int stage, int stages,
                                            int micro_batches, int chunks,
                                            const std::vector<double>& stage_costs) {
  if (schedule == PipelineSchedule::kZBH1)
    return zero_bubble_interleaved(stages, micro_batches, chunks, stage_costs).orders.at(stage);
  require(micro_batches % stages == 0,
          "an interleaved pipeline takes its micro-batches in rounds of its ", stages,
          " locations, but ", micro_batches, " micro-batches are no multiple of ", stages);
  const int steps = micro_batches * chunks;
  auto micro_batch = [&](int k) { return k / (stages * chunks) * stages + k % stages; };
  auto forward = [&](int k) {
    return PipelineStep{Pass::kForward, micro_batch(k), k / stages % chunks};
  };
  auto backward = [&](int k) {
    return PipelineStep{Pass::kBackward, micro_batch(k), chunks - 1 - k / stages % chunks};
  };
  std::vector<PipelineStep> order;
  const int warmup = schedule == PipelineSchedule::kGPipe
                         ? steps
                         : std::min((chunks - 1) * stages + 2 * (stages - 1 - stage), steps);
  for (int k = 0; k < warmup; ++k) order.push_back(forward(k));
  for (int k = 0; k < steps; ++k) {
    if (warmup + k < steps) order.push_back(forward(warmup + k));
    order.push_back(backward(k));
  }
  return order;
}

}  // namespace

std::vector<PipelineStep> schedule_order(PipelineSchedule schedule, int stage, int stages,
                                         int micro_batches, int chunks,
                                         const std::vector<double>& stage_costs) {
  if (chunks > 1)
    return interleaved_order(schedule, stage, stages, micro_batches, chunks, stage_costs);
  std::vector<PipelineStep> order;
  if (schedule == PipelineSchedule::kGPipe) {
    for (int m = 0; m < micro_batches; ++m) order.push_back({Pass::kForward, m});
    for (int m = 0; m < micro_batches; ++m) order.push_back({Pass::kBackward, m});
    return order;
  }
  const int warmup = std::min(stages - 1 - stage, micro_batches);
  const bool split = schedule == PipelineSchedule::kZBH1;
  const int delay = stage;  // ZB-H1: W(m) follows B(m + delay)
  for (int m = 0; m < warmup; ++m) order.push_back({Pass::kForward, m});
  for (int m = 0; m < micro_batches; ++m) {
    if (warmup + m < micro_batches) order.push_back({Pass::kForward, warmup + m});
    order.push_back({Pass::kBackward, m});
    if (split && m >= delay) order.push_back({Pass::kWeight, m - delay});
  }
  if (split)
    for (int m = std::max(0, micro_batches - delay); m < micro_batches; ++m)
      order.push_back({Pass::kWeight, m});
  return order;
}

namespace {
// The stage at location `at` of `n` nearest to stage `s`: the first from s on, or the last up
// to s (negative where there is none).
int first_from(int s, int at, int n) { return s + ((at - s % n) + n) % n; }
int last_up_to(int s, int at, int n) { return s - ((s % n - at) + n) % n; }
}  // namespace

ChunkOf chunks_of(const Graph& graph, const std::vector<ModelLayer>& layers,
                  const std::vector<int>& stage_of, const std::vector<Location>& locations) {
  require(stage_of.size() == layers.size(), "chunks_of: ", layers.size(), " layers, ",
          stage_of.size(), " stage numbers");
  const int n = static_cast<int>(locations.size());
  const int last = stage_of.empty() ? 0 : *std::max_element(stage_of.begin(), stage_of.end());
  auto where = [&](const Op* op) {
    return static_cast<int>(std::find(locations.begin(), locations.end(), op->location()) -
                            locations.begin());
  };
  auto stage = std::make_shared<std::map<const Op*, int>>();
  const std::vector<Op*> order = graph.topological_order();
  // The ops a layer makes at its stage's location (ops elsewhere, another replica's, are not
  // this pipeline's).
  for (const Op* op : order) {
    const int at = where(op);
    if (at == n) continue;
    for (size_t i = 0; i < layers.size(); ++i)
      if (in_scope(op->name(), layers[i].name)) {
        if (stage_of[i] % n == at) (*stage)[op] = stage_of[i];
        break;
      }
  }
  // The others at the pipeline's locations (the data, the loss, a copy named after what it
  // copies from another stage, the sum of a copy's gradients) go with the ops that read what
  // they make: a forward op with the first of their stages, a backward op with the last (the
  // backward pass goes through the stages in reverse). A reader at another location is a copy
  // taking the data on, to a later stage (forward) or an earlier one (a gradient).
  for (auto op = order.rbegin(); op != order.rend(); ++op) {
    const int at = where(*op);
    if (at == n || stage->count(*op)) continue;
    const bool backward = (*op)->role() == OpRole::kBackward;
    int best = -1;
    for (const Blob* out : (*op)->outputs())
      for (const Op* reader : out->readers()) {
        auto it = stage->find(reader);
        if (it == stage->end()) continue;
        const int r = it->second;
        const int s = where(reader) == at ? r
                      : backward          ? first_from(r, at, n)
                                          : last_up_to(r, at, n);
        if (s >= 0 && s <= last)
          best = best < 0 ? s : backward ? std::max(best, s) : std::min(best, s);
      }
    if (best >= 0) (*stage)[*op] = best;
  }
  // What the pipeline does not read (a loss's value, sent on to be averaged) goes after what
  // it reads, at its location; reading nothing either, a forward op with the first stage, a
  // backward op with the last.
  for (const Op* op : order) {
    const int at = where(op);
    if (at == n || stage->count(op)) continue;
    const bool backward = op->role() == OpRole::kBackward;
    int read = -1;
    for (const Blob* in : op->inputs())
      for (const Op* w : in->writers())
        if (auto it = stage->find(w); it != stage->end()) read = std::max(read, it->second);
    if (read < 0) read = backward ? last : 0;
    (*stage)[op] = std::min(first_from(read, at, n), last);
  }
  return [stage, n](const Op& op) {
    auto it = stage->find(&op);
    return it == stage->end() ? 0 : it->second / n;
  };
}

namespace {

const char* pass_name(Pass pass) {
  switch (pass) {
    case Pass::kForward:
      return "forward";
    case Pass::kBackward:
      return "backward";
    case Pass::kWeight:
      return "weight";
  }
  return "?";
}

// "forward pass of micro-batch 3", "... through chunk 1" where a location holds several stages.
std::string step_name(const PipelineStep& step, int chunks) {
  return str(pass_name(step.pass), " pass of micro-batch ", step.micro_batch,
             chunks > 1 ? str(" through chunk ", step.chunk) : std::string());
}

// Every forward and backward pass of each micro-batch and chunk once, a weight pass at most
// once; returns the place of each in `order`.
std::map<PipelineStep, size_t> check_stage_order(const std::vector<PipelineStep>& order, int stage,
                                                 const Location& at, int micro_batches,
                                                 int chunks) {
  std::map<PipelineStep, size_t> place;
  const std::string chunk_range = chunks > 1 ? str(" and chunks 0..", chunks - 1) : "";
  for (size_t i = 0; i < order.size(); ++i) {
    const PipelineStep& step = order[i];
    const bool known = step.micro_batch >= 0 && step.micro_batch < micro_batches &&
                       step.chunk >= 0 && step.chunk < chunks;
    require(known, "pipeline schedule: stage ", stage, " at ", at, " lists the ",
            step_name(step, chunks), ", not one of micro-batches 0..", micro_batches - 1,
            chunk_range);
    require(place.emplace(step, i).second, "pipeline schedule: stage ", stage, " at ", at,
            " lists the ", step_name(step, chunks), " twice");
  }
  for (int m = 0; m < micro_batches; ++m)
    for (int c = 0; c < chunks; ++c)
      for (Pass pass : {Pass::kForward, Pass::kBackward})
        require(place.count({pass, m, c}) == 1, "pipeline schedule: stage ", stage, " at ", at,
                " does not list the ", step_name({pass, m, c}, chunks));
  return place;
}

}  // namespace

void schedule_pipeline(Graph& graph, const std::vector<Location>& stages, int micro_batches,
                       PipelineSchedule schedule, int chunks, const ChunkOf& chunk_of,
                       const std::vector<double>& stage_costs) {
  const int n = static_cast<int>(stages.size());
  schedule_pipeline(
      graph, stages, micro_batches,
      [&](int s) { return schedule_order(schedule, s, n, micro_batches, chunks, stage_costs); },
      chunks, chunk_of);
}

void schedule_pipeline(Graph& graph, const std::vector<Location>& stages, int micro_batches,
                       const StageOrder& order_of, int chunks, const ChunkOf& chunk_of) {
  require(chunks == 1 || chunk_of, "schedule_pipeline: ", chunks,
          " stages per location, but no way to tell them apart (chunk_of)");
  const int n = static_cast<int>(stages.size());
  const std::vector<Op*> ops = graph.topological_order();
  for (int s = 0; s < n; ++s) {
    const std::vector<PipelineStep> order = order_of(s);
    const std::map<PipelineStep, size_t> place =
        check_stage_order(order, s, stages[s], micro_batches, chunks);
    const bool split = std::any_of(order.begin(), order.end(), [](const PipelineStep& step) {
      return step.pass == Pass::kWeight;
    });
    // The ops of each pass of each micro-batch and chunk on this location's main thread, in
    // graph order.
    std::map<PipelineStep, std::vector<Op*>> passes;
    // The pass (its place in `order`) each of those ops is in, or follows.
    std::map<const Op*, size_t> position;
    std::map<size_t, std::vector<Op*>> following;  // ops that follow a pass, by its place
    for (Op* op : ops) {
      if (op->location() != stages[s] || op->thread() != Graph::kMainThread) continue;
      if (op->role() != OpRole::kForward && op->role() != OpRole::kBackward) continue;
      const std::optional<Pass> scheduled = pass_of(*op);
      if (!scheduled) continue;
      PipelineStep step{*scheduled, micro_batch_of(*op), chunks > 1 ? chunk_of(*op) : 0};
      if (step.pass == Pass::kWeight && !split) step.pass = Pass::kBackward;
      require(step.chunk >= 0 && step.chunk < chunks, "pipeline schedule: op '", op->name(),
              "' at ", stages[s], " is in chunk ", step.chunk, " of ", chunks);
      passes[step].push_back(op);
      auto at = place.find(step);
      position[op] = at == place.end() ? order.size() : at->second;
    }
    // A backward op of no micro-batch (a sum of the micro-batches' weight gradients) follows the
    // last pass it reads from, so that what it reads is dead before the next pass starts and
    // the memory plan can reuse it.
    for (Op* op : ops) {
      if (op->location() != stages[s] || op->thread() != Graph::kMainThread ||
          op->role() != OpRole::kBackward || micro_batch_of(*op) >= 0)
        continue;
      // Only when everything it reads comes from here: a value from elsewhere may wait for a
      // later pass of this stage.
      std::optional<size_t> after;
      bool local = true;
      for (const Blob* in : op->inputs())
        for (const Op* w : in->writers()) {
          auto it = position.find(w);
          local = local && it != position.end();
          if (local) after = std::max(after.value_or(0), it->second);
        }
      if (!local || !after) continue;
      position[op] = *after;
      following[*after].push_back(op);
    }
    Op* last = nullptr;
    auto append = [&](Op* op) {
      if (last) graph.add_order(last, op);
      last = op;
    };
    for (size_t i = 0; i < order.size(); ++i) {
      const PipelineStep& step = order[i];
      auto it = passes.find(step);
      if (it == passes.end() && step.pass == Pass::kWeight) continue;  // a stage without weights
      require(it != passes.end(), "pipeline schedule: stage ", s, " at ", stages[s],
              " has no op of the ", step_name(step, chunks), " on its main thread");
      for (Op* op : it->second) append(op);
      for (Op* op : following[i]) append(op);
    }
  }
}

}  // namespace purine
