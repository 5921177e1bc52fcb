// `purine predict` and `purine export`: inference and weights export with a trained checkpoint
// (train/predictor.hpp). They share train's flags for the model and its data (--model, --data,
// --checkpoint, --classes, --input-mean, --input-std, --threads).
#pragma once

#include <string>
#include <vector>

namespace purine::cli {

// The flags `purine predict --help` and `purine export --help` list.
std::vector<std::string> predict_flags();
std::vector<std::string> export_flags();
// Return the process exit code; throw purine::Error on bad flags, files or data.
int run_predict();
int run_export();

}  // namespace purine::cli
