// What the purine tool tells a user about its flags: each command's `--help`, the refusal of a
// flag no command knows (with the known name it is likely a typo of), and the "did you mean"
// suggestion a config file's unknown field gets too. Functions of the gflags registry, which
// they read and never change; call them from the main thread.
#pragma once

#include <string>
#include <vector>

namespace purine::cli {

// One flag in a command's --help: its gflags name (max_iters) and, where the command means
// something of its own by a flag it shares (predict's --checkpoint is read, train's written),
// the text that replaces the flag's description; empty: the description it was defined with.
struct FlagHelp {
  std::string name;
  std::string text;
};

// The flags `purine <command> --help` lists, in order: train's (those defined in
// train_command.cpp less graph's own), graph's (train's, which build the graph it draws, and
// its own), predict's and export's (predict_command.cpp). Empty for an unknown command.
std::vector<FlagHelp> command_flags(const std::string& command);

// `purine <command> --help`: each flag as users spell it (--max-iters), its type, its default
// (numbers in the shortest form that reads back the same: 0.9, not 0.90000000000000002) and
// its text.
std::string help_text(const std::string& command);

// The shortest decimal text that reads back as `value` (0.9, 1e-08, 0.286).
std::string shortest_number(double value);

// The name among `candidates` nearest to `name` by edit distance (insertions, deletions,
// substitutions and swaps of neighbours), if near enough to be a likely typo; else "".
std::string closest_name(const std::string& name, const std::vector<std::string>& candidates);

// Throws purine::Error for the first of `args` (gflags' spelling, underscores, the command
// word removed) that is a flag gflags does not know, naming the flag as typed and, if one is
// near, the flag of `command` it is likely a typo of:
//   unknown flag --max-iter for purine train; did you mean --max-iters? (purine train --help
//   lists its flags)
void check_flags_known(const std::string& command, const std::vector<std::string>& args);

}  // namespace purine::cli
