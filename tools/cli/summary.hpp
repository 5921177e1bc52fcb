// The JSON summary `purine train --summary=FILE` writes.
#pragma once

#include <string>

#include "train/trainer.hpp"

namespace purine::cli {

// A number for JSON with `digits` significant digits; JSON has no NaN or infinity, so a
// non-finite value is null.
std::string json_number(double value, int digits);

// Written durably (purine/durable_file.hpp); throws purine::Error naming the path if it cannot
// be written (a full disk included).
void write_summary(const std::string& path, const TrainOptions& options, const TrainResult& result);

}  // namespace purine::cli
