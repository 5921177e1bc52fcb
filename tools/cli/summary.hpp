// The JSON summary `purine train --summary=FILE` writes.
#pragma once

#include <string>

#include "train/trainer.hpp"

namespace purine::cli {

// Written durably (purine/durable_file.hpp); throws purine::Error naming the path if it cannot
// be written (a full disk included).
void write_summary(const std::string& path, const TrainOptions& options, const TrainResult& result);

}  // namespace purine::cli
