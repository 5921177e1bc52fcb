// The JSON summary `purine train --summary=FILE` writes.
#pragma once

#include <string>

#include "graphs/trainer.hpp"

namespace purine::cli {

// Throws purine::Error naming the path if it cannot be written.
void write_summary(const std::string& path, const TrainOptions& options, const TrainResult& result);

}  // namespace purine::cli
