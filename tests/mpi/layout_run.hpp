// A Trainer run on every rank, as the layout tests (pipeline, model, hybrid) compare them: what
// it printed on rank 0 and what this rank holds, with any error caught (mpi_test.hpp).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "mpi_test.hpp"
#include "purine/graph.hpp"
#include "train/trainer.hpp"

namespace purine::mpitest {

struct LayoutRun {
  std::string error;
  std::vector<double> losses;  // rank 0's
  double accuracy = 0;         // rank 0's
  std::vector<float> weights;  // this rank's parameters, in registration order
  int ranks_holding_weights = 0;
  size_t locations_here = 0;  // where this rank keeps parameters
};

inline LayoutRun train_layout(const TrainOptions& o) {
  LayoutRun run;
  run.error = run_and_catch([&] {
    Trainer trainer(o);
    run.accuracy =
        trainer.train([&](const TrainProgress& p) { run.losses.push_back(p.loss); }).test_accuracy;
    std::vector<bool> holds(o.ranks, false);
    std::set<Location> here;
    for (const Parameter& p : trainer.training_graph().parameters()) {
      holds[p.blob->location().rank] = true;
      if (p.blob->location().rank != o.rank) continue;
      here.insert(p.blob->location());
      const std::vector<float> v = values_of(p.blob->tensor());
      run.weights.insert(run.weights.end(), v.begin(), v.end());
    }
    for (bool h : holds) run.ranks_holding_weights += h;
    run.locations_here = here.size();
  });
  return run;
}

}  // namespace purine::mpitest
