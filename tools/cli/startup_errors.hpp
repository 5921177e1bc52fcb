// The errors of the purine tool that every MPI rank meets alike: a bad flag, a flag value
// gflags cannot read, options the trainer refuses. They come from the command line (the same on
// every rank) before any communication, so under mpirun the tool tells them once, from rank 0,
// and every rank finalizes MPI and exits 1: no MPI_Abort, no abort banner. Any other error may
// be one rank's own (a file missing on one node, a failure in training): each failing rank
// prints its own line and the job is aborted, so that no rank waits for it.
//
// So that no rank can wait forever for one that took the quiet way out, the ranks agree first:
// every rank calls settle_startup() at the same points with the error it met, if any, and only
// when every rank met one do they all leave quietly. Functions of the main thread.
#pragma once

#include <string>
#include <vector>

#include "base/error.hpp"

namespace purine::cli {

// Every rank met an error before any communication (this rank's message); thrown on every rank.
class EveryRankError : public Error {
 public:
  using Error::Error;
};

// Call on every rank at the same point, before any other communication, with the error this
// rank met there ("" for none). Returns when no rank met one. Throws EveryRankError when every
// rank did (or when MPI runs one rank, or none), else Error: this rank's, or on a rank that met
// none, that another rank failed (its own line says why) — the job is then aborted.
void settle_startup(const std::string& problem);

// Throws purine::Error, in the words of the flags, for the first of `args` (gflags' spelling,
// the command word removed; every flag known) whose value gflags would refuse and end the
// process over ("--batch=abc"), or that lacks its value ("--lr" last). Leaves every flag as it
// was.
void check_flag_values(const std::vector<std::string>& args);

}  // namespace purine::cli
