// Process-wide caches of IDX splits (operators/cpu/idx_file.hpp), so that the data ops of one
// process read each split once: every replica's data op, and every trainer a test or a tool
// builds in turn, would otherwise decompress the whole training set again just to learn its size.
// A cache entry belongs to the files as they are on disk: their paths, sizes, modification and
// change times, inodes and a fingerprint of their first and last bytes (which, for gzip, hold
// the checksum of the content), so a file rewritten or replaced is read again. A load that
// throws is not cached. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "operators/cpu/idx_file.hpp"

namespace purine {

// The whole split, shared by every caller while one of them holds it.
std::shared_ptr<const IdxDataset> shared_idx_dataset(const std::string& dir,
                                                     const std::string& split);

// The split's metadata (the dataset without its pixels), kept for the life of the process.
// Checking a gzip file's length decompresses all of it, so the split is read whole, and its
// pixels are kept for the next shared_idx_dataset call: training asks for the metadata as it
// builds its graph and for the pixels as its data op starts, and would otherwise decompress the
// training set twice (0.2 s of a 1 s start with Fashion-MNIST on a 2-core machine). A process
// that never asks for the pixels holds them until it ends.
IdxDataset cached_idx_metadata(const std::string& dir, const std::string& split);

// How many times this process has read a split's files for the caches above (tests).
int64_t idx_cache_reads();

}  // namespace purine
