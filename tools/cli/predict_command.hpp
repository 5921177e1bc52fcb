// `purine predict` and `purine export`: inference and weights export with a trained checkpoint
// (train/predictor.hpp). They share train's flags for the model and its data (--model, --data,
// --checkpoint, --classes, --input-mean, --input-std, --threads), which their --help describes
// in their own words (predict reads --checkpoint, train writes it).
#pragma once

#include <string>
#include <vector>

#include "tools/cli/help.hpp"

namespace purine::cli {

// The flags `purine predict --help` and `purine export --help` list, each with the text of
// what it means to that command.
std::vector<FlagHelp> predict_flags();
std::vector<FlagHelp> export_flags();
// Return the process exit code; throw purine::Error on bad flags, files or data.
int run_predict();
int run_export();

}  // namespace purine::cli
