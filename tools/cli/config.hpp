// `purine train --config=FILE`: a TrainConfig (proto/purine.proto) in protobuf text format whose
// fields are the train flags of the same names. Its fields become the flags' defaults, so that a
// flag on the command line overrides the file; `--print-config` writes the effective
// configuration, every field from its flag.
#pragma once

#include <string>

namespace purine::cli {

// Throws purine::Error naming the file, line and column of a syntax error or an unknown field,
// or a field whose value its flag refuses.
void apply_config_file(const std::string& path);
// Every TrainConfig field with its flag's current value, as protobuf text.
std::string effective_config();

}  // namespace purine::cli
