// Pipeline (inter-layer) parallelism as placement: a sequential model is cut into S stages of
// consecutive layers, each stage built at its own location (a CPU location of this process, a
// GPU, or an MPI rank), without changing the model's code (Graph::place). Activations cross
// from stage to stage by the copies the builder inserts, and their gradients come back by the
// copies autodiff adds (purine/autodiff.hpp), so one run of the graph is one forward and
// backward pass of the whole batch through the stages; the weights stay at their stage, where
// the optimizer updates them.
//
// With micro-batches (M copies of the network sharing their weights, each on a slice of the
// batch, "micro<m>" in their names: train/), the stages overlap: stage s works on micro-batch m
// while stage s+1 works on m-1. The order of each stage's forward and backward work is a
// schedule, fixed by orders between ops (Graph::add_order), so that every run is the same:
//   kGPipe: all forwards, then all backwards (M micro-batches' activations held at once);
//   k1F1B:  S-1-s forwards, then one forward and one backward in turn, then the remaining
//           backwards (at most S-s micro-batches' activations held at stage s);
//   kZBH1:  1F1B with each backward cut in two (zero bubble, Qi et al. 2023, the H1 form): the
//           input gradients (B), which the stage before waits for, and the weight gradients (W),
//           which nobody waits for; stage s runs W(m) after B(m + s), so that the Ws fill the
//           cool-down where 1F1B idles (longest at the last stage, whose backwards end first).
//           Every stage then holds S micro-batches' inputs, what 1F1B holds at stage 0.
// GPipe and 1F1B leave the bubble (S-1)/(M+S-1) of each iteration idle when every stage takes
// the same time; ZB-H1 about a third of it. Interleaved stages (below) run under all three. Every
// rank builds the whole graph, so validate() proves before the first run that the orders of all
// ranks together cannot wait in a circle. Batch norm chains the micro-batches' updates of its
// running statistics (micro-batch m's op reads what m-1's wrote: graphs/layers.hpp), so the forward
// passes of its stage run in micro-batch order under every schedule; an order of one's own that
// lists them otherwise is such a circle.
//
// Stages are cut between layers with parameters, every layer without parameters (an activation,
// a pooling) going with the layer before it, so that the most costly stage costs least. A
// layer's cost is the roofline time, on a device doing kFlopsPerByte flops per byte it moves,
// of its forward and backward ops (Operator::cost; the backward of a loss on the model's output,
// or, without one, twice the forward) and of its weights' update. GoogLeNet over 3 GPUs, cut evenly
// by layer count instead, gave its first stage 2.9 times the last's work. A stage also pays for
// the activations that cross its cuts, forward and (their gradients) back, at kLinkSlowdown
// times the cost of moving them in memory: a cut after a pooling moves less than one before
// it. Layers without costs (none known) count one each: the k-th of P parametric layers then
// goes to stage floor(k*S/P).
// A cut may also fall inside a layer built of parts (an inception module: four branches of
// convolutions), between its parts, where whole layers are too coarse to balance the stages
// (stage_units). The tensors that cross such a cut (the module's input, the branches before
// it) are copied as any other (Graph::place).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "base/location.hpp"
#include "purine/graph.hpp"

namespace purine {

// One block of a model, as Graph::layer_names() lists it, or one part of such a block.
struct ModelLayer {
  std::string name;        // full name in the graph it was found in ("mlp::fc1")
  int64_t parameters = 0;  // elements of its parameters
  double cost = 0;         // its training step's roofline time, in flops (see above)
  // Its parts (Graph::part_names), costed the same way; their parameters and costs are part of
  // the layer's own.
  std::vector<ModelLayer> parts = {};
  // The bytes of the forward activations that a cut right after it would cross: written by it
  // or before, read after it.
  double bytes_after = 0;
};

// The machine balance assumed by a layer's cost: flops per byte moved, between a CPU's
// (about 5) and a GPU's (about 15).
constexpr double kFlopsPerByte = 10;
// How much slower a copy between stages moves a byte than a device's memory: PCIe 3 against
// the paper's GPUs 34x (10 against 336 GB/s), NVLink against an H100's memory 7x. Between CPU
// locations of one process a copy is a memcpy: 1 (stage_link_slowdown).
constexpr double kLinkSlowdown = 10;

// The layers of the model that `build` puts into an empty scratch graph (set up to the end),
// in order, with their costs at the scratch graph's shapes.
std::vector<ModelLayer> model_layers(const std::function<void(Graph&)>& build);

// Replaces the roofline cost of every layer and part that ops in `seconds` (task times by name,
// a --trace's medians: train/simulation.hpp read_trace_times) belong to by the sum of their
// times: an op belongs to the layer or part whose scope its name holds, after any scopes of its
// own ("replica0::micro1::mlp::fc1::inner_product" to mlp::fc1). Measured times are put in the
// roofline's units by the ratio of the two sums over the measured layers, so that the layers no
// op was traced for keep their estimate and a cut's crossing keeps its weight. Returns how many
// layers were measured.
int measure_layers(std::vector<ModelLayer>& layers, const std::map<std::string, double>& seconds);

// Where a pipeline's cuts may fall: kParts between the parts of a layer too, where they balance
// the stages best, kLayers between whole layers only.
enum class StageCut { kParts, kLayers };

// The units `cut` lets a pipeline be cut between: `layers` themselves (kLayers), or every layer
// with parts replaced by its parts followed by the layer itself, which then holds only what its
// parts do not (parameter-free: placed with its last part, where its top is made). Give the
// result to assign_stages() and place_stages(). A cut between parts sums the gradient of a
// tensor read on both sides of it in another association than one location does (the readers
// beyond the cut first, at their stage): the same training within float rounding, where a cut
// between whole layers adds in one location's order.
std::vector<ModelLayer> stage_units(const std::vector<ModelLayer>& layers,
                                    StageCut cut = StageCut::kParts);

enum class PipelineSchedule { kGPipe, k1F1B, kZBH1 };

// How a pipeline runs its stages, for a cut that suits it: interleaved when over fewer
// `locations` than stages (stage j at location j % locations; 0: a location per stage).
struct PipelineRun {
  int locations = 0;
  int micro_batches = 1;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
};

// The time an iteration of `run` takes over stages costing `costs` (their forward passes a
// third, their backwards two thirds), stage j at location j % run.locations (0: a location per
// stage), each location taking its passes in the schedule's order as soon as their inputs are
// ready, with nothing for copies; infinite where the orders wait on each other. What the
// interleaved cut below is chosen by.
double pipeline_time(const std::vector<double>& costs, const PipelineRun& run);

// The stage of every layer for `stages` stages (see above), a byte crossing a cut costing
// `link_slowdown` times a byte moved in memory. Interleaved (run.locations < stages), the cut
// is then reworked for the time of the run's schedule over the stages' costs: a location does
// all of its stages' work for every micro-batch, and a costly stage holds up the next
// location's. Throws purine::Error, naming `model` and its layers, when stages < 1 or the
// model has fewer layers with parameters.
std::vector<int> assign_stages(const std::vector<ModelLayer>& layers, int stages,
                               const std::string& model, double link_slowdown = kLinkSlowdown,
                               const PipelineRun& run = {});
// The link slowdown between `stages`: 1 where all are CPU locations of one rank, else
// kLinkSlowdown.
double stage_link_slowdown(const std::vector<Location>& stages);

// Places layer i at stage stage_of[i]'s location in `graph` (Graph::place: composites created
// later under that name, in any scope, are built there): stage j at locations[j % S] for S
// locations, so that with more stages than locations each location holds several, interleaved
// (stage j is chunk j / S of its location: see below).
void place_stages(Graph& graph, const std::vector<ModelLayer>& layers,
                  const std::vector<int>& stage_of, const std::vector<Location>& locations);

// The micro-batch an op works on: m when its name has the scope "micro<m>"; -1 when none (the
// sums of weight gradients over micro-batches, the updates).
int micro_batch_of(const Op& op);

// A pass of one micro-batch through one stage: its forward ops, its backward ops that compute
// gradients of activations, and those that compute only weight gradients (no op of the
// micro-batch reads their outputs: the sums over micro-batches and the updates do).
enum class Pass { kForward, kBackward, kWeight };
// The pass of a forward or backward op of a micro-batch (see above) in its stage's order, or
// none for an op the schedule leaves to run when ready: one of no micro-batch, or a forward op
// whose results no op of its micro-batch reads (the copy of the last stage's loss back to the
// first, for the sum over micro-batches: it waits for the whole pipeline's forward pass, and in
// the first stage's order it would hold that stage's next backward until then).
std::optional<Pass> pass_of(const Op& op);

// Interleaved stages (Narayanan et al. 2021, "virtual stages"): a model cut into S*V stages over
// S locations, stage j at location j % S, lets each location hold V chunks of the model, the
// first location the 1st, (S+1)-th, ... stage. A micro-batch then goes round the locations V
// times, each pass 1/V as long, so that filling and draining the pipeline idles a location V
// times shorter; the price is V times the copies between locations. The schedules of
// interleaved stages take the micro-batches in rounds of S: a location runs a round's forwards
// through its first chunk, then the same round through its second, and so on (the backwards
// through the chunks in reverse), so M must be a multiple of S.

// One pass of one micro-batch through one of a location's stages: its chunk, 0 where a location
// holds one stage.
struct PipelineStep {
  Pass pass;
  int micro_batch;
  int chunk = 0;
  friend bool operator==(const PipelineStep& a, const PipelineStep& b) {
    return a.pass == b.pass && a.micro_batch == b.micro_batch && a.chunk == b.chunk;
  }
  friend bool operator<(const PipelineStep& a, const PipelineStep& b) {
    return std::tie(a.pass, a.micro_batch, a.chunk) < std::tie(b.pass, b.micro_batch, b.chunk);
  }
};

// The share of an iteration a location idles when every stage's forward, input-gradient and
// weight-gradient passes take equal times: (S-1)/(M+S-1) under GPipe and 1F1B, (S-1)/(3M+S-1)
// under ZB-H1 (whose weight gradients fill the cool-down), (S-1)/(V*M+S-1) with `chunks` = V
// interleaved stages per location, 0 for one stage; interleaved ZB-H1 that of its run
// (graphs/zero_bubble_interleaved.hpp: 0.040 against 1F1B's 0.111 at S=2, V=2, M=4).
double bubble_theory(PipelineSchedule schedule, int stages, int micro_batches, int chunks = 1);
// For location `stage` of `stages` holding `chunks` stages each, the order of its passes over
// the micro-batches. GPipe and 1F1B have no kWeight passes (a backward pass includes its weight
// gradients). Interleaved (chunks > 1): 1F1B as Narayanan et al.'s interleaved schedule (a
// warm-up of (V-1)*S + 2*(S-1-s) forwards), GPipe all forwards first, ZB-H1 the orders of a run
// of the stages' costs (`stage_costs`, one per stage, none: equal) that
// graphs/zero_bubble_interleaved.hpp makes. Throws purine::Error, under GPipe and 1F1B, for
// chunks > 1 with micro_batches not a multiple of stages.
std::vector<PipelineStep> schedule_order(PipelineSchedule schedule, int stage, int stages,
                                         int micro_batches, int chunks = 1,
                                         const std::vector<double>& stage_costs = {});

// The chunk of an op at a location of an interleaved pipeline (see above): that of the stage
// holding the layer or part whose scope its name holds (place_stages's `layers`, `stage_of`,
// `locations`) where that stage is at the op's location; any other op (the data, the loss, a
// copy named after what it copies from another stage, the sum of a copy's gradients) goes with
// the ops that read what it makes, or, read by none, after what it reads.
using ChunkOf = std::function<int(const Op&)>;
ChunkOf chunks_of(const Graph& graph, const std::vector<ModelLayer>& layers,
                  const std::vector<int>& stage_of, const std::vector<Location>& locations);

// Orders the forward and backward ops of every micro-batch on the main thread of each
// location of `stages` by `schedule` (ops of one pass in graph order), each location holding
// `chunks` stages told apart by `chunk_of` (needed when chunks > 1), and costing `stage_costs`
// (for interleaved ZB-H1; none: equal). Call after backward(), before running. Throws
// purine::Error when a location has no op of some micro-batch's pass (the graph is not a
// pipeline of `micro_batches` over `stages`).
void schedule_pipeline(Graph& graph, const std::vector<Location>& stages, int micro_batches,
                       PipelineSchedule schedule, int chunks = 1, const ChunkOf& chunk_of = {},
                       const std::vector<double>& stage_costs = {});
// The same with a schedule of one's own: order_of(s) lists location s's passes as
// schedule_order() does, each forward and backward pass of every micro-batch and chunk exactly
// once (weight passes, when listed, split them out of the backwards). Graph::validate() then
// checks that the locations' orders together cannot wait in a circle. Throws purine::Error,
// naming the location and pass, when an order lists a pass twice or misses one.
using StageOrder = std::function<std::vector<PipelineStep>(int stage)>;
void schedule_pipeline(Graph& graph, const std::vector<Location>& stages, int micro_batches,
                       const StageOrder& order_of, int chunks = 1, const ChunkOf& chunk_of = {});

}  // namespace purine
