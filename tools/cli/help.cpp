#include "tools/cli/help.hpp"

#include <gflags/gflags.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

#include "base/error.hpp"
#include "tools/cli/predict_command.hpp"
#include "tools/cli/simulate_command.hpp"

namespace purine::cli {

namespace {

std::string dashed(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

// Optimal string alignment distance: Levenshtein's, with a swap of two neighbours one edit.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

bool has_flag(const std::string& command, const std::string& name) {
  for (const FlagHelp& flag : command_flags(command))
    if (flag.name == name) return true;
  return false;
}

std::string default_text(const gflags::CommandLineFlagInfo& f) {
  if (f.type == "double") return shortest_number(std::strtod(f.default_value.c_str(), nullptr));
  return f.default_value.empty() ? "\"\"" : f.default_value;
}

}  // namespace

std::vector<FlagHelp> command_flags(const std::string& command) {
  if (command == "predict") return predict_flags();
  if (command == "export") return export_flags();
  if (command == "simulate") return simulate_flags();
  if (command != "train" && command != "graph") return {};
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);  // sorted by file, then by name
  std::vector<FlagHelp> flags;
  // Train flags about running, timing or saving a training, not about its graph.
  static const std::set<std::string> not_graph = {
      "epochs",           "max_iters",     "lr",
      "lr_policy",        "lr_gamma",      "lr_step",
      "lr_power",         "lr_milestones", "lr_warmup",
      "lr_warmup_start",  "seed",          "summary",
      "executor",         "trace",         "checkpoint_dir",
      "checkpoint_every", "keep",          "checkpoint",
      "resume",           "resume_from",   "export_graph",
      "evaluate",         "stall_timeout", "test_samples",
      "test_every",       "metrics",       "math",
      "deterministic",    "cuda_graph",    "run_ahead",
      "print_config"};
  for (const gflags::CommandLineFlagInfo& f : all)
    // graph: its own flags (graph_command.cpp) and the train flags that build the graph.
    if ((f.filename.find("tools/cli/train_command.cpp") != std::string::npos &&
         (command == "train" || !not_graph.count(f.name))) ||
        (command == "graph" && f.filename.find("tools/cli/graph_command.cpp") != std::string::npos))
      flags.push_back({f.name, ""});
  if (command == "graph") {
    flags.push_back({"output", "the file to write (default: MODEL.FORMAT, e.g. mlp.svg)"});
    flags.push_back({"ranks",
                     "draw the graph of this many MPI ranks, built in this one process as every "
                     "rank builds it (no mpirun needed); with --parallel=none, data parallel "
                     "(without it: the ranks this process was started with, 1 without mpirun)"});
  }
  return flags;
}

std::string help_text(const std::string& command) {
  std::ostringstream out;
  out << "usage: purine " << command
      << " [flags]   (flags may be written --max-iters or --max_iters)\n";
  for (const FlagHelp& flag : command_flags(command)) {
    gflags::CommandLineFlagInfo f;
    require(gflags::GetCommandLineFlagInfo(flag.name.c_str(), &f), "purine ", command,
            " lists a flag it does not define: --", dashed(flag.name));
    out << "  --" << dashed(f.name) << " (" << f.type << ", default " << default_text(f)
        << ")\n      " << (flag.text.empty() ? f.description : flag.text) << "\n";
  }
  out << "--helpfull lists every flag, glog's and gflags' included.\n";
  return out.str();
}

std::string shortest_number(double value) {
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  // 1e-8, not 1e-08.
  std::string shortest = text;
  const size_t exponent = shortest.find_first_of("eE");
  if (exponent != std::string::npos) {
    size_t digits = exponent + 1;
    if (digits < shortest.size() && (shortest[digits] == '-' || shortest[digits] == '+')) ++digits;
    while (digits + 1 < shortest.size() && shortest[digits] == '0') shortest.erase(digits, 1);
  }
  return shortest;
}

std::string closest_name(const std::string& name, const std::vector<std::string>& candidates) {
  // A third of the name's letters may be wrong (one for short names, at most three).
  const size_t allowed = std::clamp<size_t>(name.size() / 3, 1, 3);
  std::string best;
  size_t best_distance = allowed + 1;
  for (const std::string& candidate : candidates) {
    const size_t distance = edit_distance(name, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

void check_flags_known(const std::string& command, const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") return;  // gflags: the flags end here
    if (arg.size() < 2 || arg[0] != '-') continue;
    const size_t dashes = arg[1] == '-' ? 2 : 1;
    const size_t equals = arg.find('=');
    const std::string name =
        arg.substr(dashes, equals == std::string::npos ? std::string::npos : equals - dashes);
    gflags::CommandLineFlagInfo info;
    const bool known = gflags::GetCommandLineFlagInfo(name.c_str(), &info);
    const bool negated = !known && name.rfind("no", 0) == 0 &&
                         gflags::GetCommandLineFlagInfo(name.substr(2).c_str(), &info) &&
                         info.type == "bool";  // --noevaluate
    if (known || negated) {
      // A flag of another purine command would be ignored without a word.
      if (info.filename.find("tools/cli/") != std::string::npos && !has_flag(command, info.name)) {
        std::string owners;
        for (const char* other : {"train", "graph", "predict", "export", "simulate"})
          if (has_flag(other, info.name)) owners += str(owners.empty() ? "" : ", ", other);
        throw Error(str("--", dashed(info.name), " is no flag of purine ", command,
                        owners.empty() ? std::string() : " (only of " + owners + ")", "; purine ",
                        command, " --help lists its flags"));
      }
      // --lr 0.1: the next argument is the value.
      if (known && equals == std::string::npos && info.type != "bool") ++i;
      continue;
    }
    // The command's flags as users spell them, a switch also with its "no".
    std::vector<std::string> names;
    for (const FlagHelp& flag : command_flags(command)) {
      names.push_back(dashed(flag.name));
      if (gflags::GetCommandLineFlagInfo(flag.name.c_str(), &info) && info.type == "bool")
        names.push_back("no" + dashed(flag.name));
    }
    const std::string typed = dashed(name);
    const std::string near = closest_name(typed, names);
    throw Error(str("unknown flag --", typed, " for purine ", command,
                    near.empty() ? std::string() : "; did you mean --" + near + "?", " (purine ",
                    command, " --help lists its flags)"));
  }
}

}  // namespace purine::cli
