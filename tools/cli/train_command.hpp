// `purine train`: trains a model with the flags defined in train_command.cpp, prints progress
// and the test accuracy, and optionally writes a JSON summary.
#pragma once

#include "train/options.hpp"

namespace purine::cli {

// The TrainOptions the train flags (train_command.cpp) give, validated; with `ranks` > 0 for
// that many ranks instead of the MPI world's (purine simulate).
TrainOptions options_from_flags(int ranks = 0);

// --threads, shared by train, predict, graph and simulate: its value, or automatic_threads()
// for 0 (the default). Throws purine::Error on a negative value.
int threads_from_flag();

// Whether --ring-steps is auto (the default): the ring's steps are then chosen from the machines
// the ranks run on (train/ring_steps.hpp), which options_from_flags() cannot know; until then
// its options have TrainOptions' default.
bool ring_steps_automatic();

// Returns the process exit code. Throws purine::Error on bad flags or data.
int run_train();

}  // namespace purine::cli
