// `purine simulate`: the training graph `purine train` builds for a layout over --ranks ranks,
// replayed by discrete-event simulation on a cluster (--cluster, tools/sim/clusters/) with op
// times from a trace of a real run (--calibrate) or a roofline (train/simulation.hpp). Prints
// the step time, images/s and exposed communication, optionally a table over rank counts
// (--scaling) and the simulated timeline as a Chrome trace (--trace).
#pragma once

#include <vector>

#include "tools/cli/help.hpp"

namespace purine::cli {

// Returns the process exit code. Throws purine::Error on bad flags or files.
int run_simulate();
// The flags `purine simulate --help` lists, with simulate's own wording where it differs.
std::vector<FlagHelp> simulate_flags();

}  // namespace purine::cli
