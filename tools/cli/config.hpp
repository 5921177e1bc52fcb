// `purine train --config=FILE`: a TrainConfig (proto/purine.proto) in protobuf text format whose
// fields are the train flags of the same names. Its fields become the flags' defaults, so that a
// flag on the command line overrides the file; `--print-config` writes the effective
// configuration, every field from its flag. Every train flag is a field but --config (a file
// names no other file) and --print-config (an action, not a setting of the run).
#pragma once

#include <string>
#include <vector>

namespace purine::cli {

// The fields a config file gave the flags (those the command line did not override), with
// where in the file each was written, to name in the errors their values cause. A value type.
class ConfigFile {
 public:
  // `message` (an error naming flags as the CLI spells them, --lr-policy, or calling a quoted
  // value unknown) prefixed with the file, line and column of the field that set the first such
  // flag's value, and the field: "--config=run.pbtxt:3:1: field 'lr_policy': unknown
  // learning-rate policy ..."; unchanged when no field of the file set a flag or value it names.
  std::string place(const std::string& message) const;

 private:
  friend ConfigFile apply_config_file(const std::string& path);
  struct Field {
    std::string name;
    std::string value;  // as its flag takes it
    bool is_string = false;
    int line = 0, column = 0;  // counted from 1
  };
  std::string path_;
  std::vector<Field> fields_;
};

// Reads the file at `path` and makes its fields the defaults of their flags; an empty path reads
// nothing. Throws purine::Error naming the file, line and column of a syntax error or of an
// unknown field (with the field it is likely a typo of: "did you mean 'max_iters'?"), and the
// field whose value is wrong.
ConfigFile apply_config_file(const std::string& path);
// Every TrainConfig field with its flag's current value, as protobuf text, after a comment that
// names the flags that are no fields.
std::string effective_config();

}  // namespace purine::cli
