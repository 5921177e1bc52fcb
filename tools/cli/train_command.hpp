// `purine train`: trains a model with the flags defined in train_command.cpp, prints progress
// and the test accuracy, and optionally writes a JSON summary.
#pragma once

namespace purine::cli {

// Returns the process exit code. Throws purine::Error on bad flags or data.
int run_train();

}  // namespace purine::cli
