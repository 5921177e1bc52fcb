// A directory of the checkpoints one training writes as it goes: DIR/ckpt-<iteration>.purine
// (the iteration zero-padded to 10 digits), each written durably (purine/durable_file.hpp), so
// that a crash leaves every finished checkpoint intact and at most a temporary beside them. The
// newest checkpoint is the one of the highest iteration. Functions, no state; not for several
// writers on one directory at a time.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace purine {

std::string checkpoint_file(const std::string& dir, int64_t iteration);

// Creates `dir` (and its parents) if missing and checks that a file can be written there;
// throws purine::Error naming it otherwise.
void prepare_checkpoint_dir(const std::string& dir);

// The checkpoints in `dir`, (iteration, path), newest first; temporaries and other files are
// left out. Throws purine::Error when `dir` cannot be listed.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir);

// The newest checkpoint whose file is complete and intact (header and CRC checked, at most
// `max_bytes`); a damaged newer one is skipped with a warning on stderr. Empty when there is
// none.
std::string newest_checkpoint(const std::string& dir, int64_t max_bytes);

// Removes all but the newest `keep` checkpoints, and temporaries left by crashed writers.
// Failures to remove are warnings on stderr, not errors.
void prune_checkpoints(const std::string& dir, int keep);

}  // namespace purine
