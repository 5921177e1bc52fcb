// The interleaved zero-bubble schedule (--schedule=zbh1 with --virtual-stages=V): ZB-H1's split of
// each backward into its input gradients (B) and weight gradients (W), over interleaved stages
// (stage j at location j % S, graphs/pipeline.hpp). No closed form gives its order: it is
// found by running the pipeline, each pass taking a third of its stage's cost (one unit
// without costs), each location, when free, starting
//   the B of the earliest micro-batch whose gradient has come back, else
//   the F of the earliest micro-batch whose activation has come in, while the location holds
//     fewer micro-batch chunks' activations (from F until W) than interleaved 1F1B at most
//     holds there (its warm-up (V-1)*S + 2*(S-1-s), plus one), else
//   the W of the earliest micro-batch it owes one,
// ties going to the later chunk (nearer the loss going forward, the gradient's next stage
// coming back). The Ws fill what 1F1B leaves idle, with no more memory: with unequal costs a
// location may fill its limit with micro-batches that wait on one it holds no room for, and
// then, when every location waits, the earliest micro-batch still going forward goes past the
// limit. The orders are those of one possible run, so no durations make them wait on each other
// in a circle.
#pragma once

#include <vector>

#include "graphs/pipeline.hpp"

namespace purine {

struct ZeroBubbleOrders {
  std::vector<std::vector<PipelineStep>> orders;  // per location
  double length = 0;  // the run's: 3*V*M units of work per location without costs
};

// `stage_costs`: one per stage (S*V), or none. Throws purine::Error for stages, micro_batches or
// chunks below 1, or another number of costs.
ZeroBubbleOrders zero_bubble_interleaved(int stages, int micro_batches, int chunks,
                                         const std::vector<double>& stage_costs = {});

}  // namespace purine
