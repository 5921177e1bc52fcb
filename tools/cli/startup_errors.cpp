#include "tools/cli/startup_errors.hpp"

#include <gflags/gflags.h>

#include <algorithm>

#include "purine/mpi.hpp"

namespace purine::cli {

void settle_startup(const std::string& problem) {
  const bool failed = !problem.empty();
  const int failures = mpi_count_ranks(failed);
  if (failures == 0) return;
  if (failures == mpi_world_size()) throw EveryRankError(problem);
  if (failed) throw Error(problem);
  throw Error(str(failures, " other rank", failures == 1 ? "" : "s",
                  " could not start (see their error lines); this one stops with them"));
}

void check_flag_values(const std::vector<std::string>& args) {
  gflags::FlagSaver saver;  // the trials below change flags: put them back
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") return;
    if (arg.size() < 2 || arg[0] != '-') continue;
    const size_t dashes = arg[1] == '-' ? 2 : 1;
    const size_t equals = arg.find('=');
    std::string name =
        arg.substr(dashes, equals == std::string::npos ? std::string::npos : equals - dashes);
    gflags::CommandLineFlagInfo info;
    if (!gflags::GetCommandLineFlagInfo(name.c_str(), &info)) continue;  // --noevaluate
    // gflags handles these itself (they name files or variables).
    if (name == "flagfile" || name == "fromenv" || name == "tryfromenv") continue;
    std::string dashed = name;
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    std::string value;
    if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
    } else if (info.type == "bool") {
      continue;  // --evaluate
    } else if (i + 1 < args.size()) {
      value = args[++i];  // --lr 0.1
    } else {
      throw Error(str("--", dashed, " needs a value: give --", dashed, "=VALUE"));
    }
    if (!gflags::SetCommandLineOption(name.c_str(), value.c_str()).empty()) continue;
    const std::string kind = info.type == "bool"     ? "true or false"
                             : info.type == "double" ? "a number"
                             : info.type == "uint64" ? "a non-negative integer"
                             : info.type == "string" ? "a string"
                                                     : "an integer";
    throw Error(str("--", dashed, " takes ", kind, ", got '", value, "'"));
  }
}

}  // namespace purine::cli
