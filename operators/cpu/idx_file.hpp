// IDX files, the format of MNIST and Fashion-MNIST: one image file and one label file per split,
//   <dir>/train-images-idx3-ubyte[.gz]  <dir>/train-labels-idx1-ubyte[.gz]   (split "train")
//   <dir>/t10k-images-idx3-ubyte[.gz]   <dir>/t10k-labels-idx1-ubyte[.gz]    (split "test")
// Each file is read gzip-compressed when the ".gz" name exists, else uncompressed under the name
// without ".gz". Headers are big-endian: images hold magic 0x00000803, count, rows, cols and then
// count*rows*cols unsigned bytes; labels hold magic 0x00000801, count and count bytes.
// Every problem (missing file, wrong magic, truncated or trailing data, count mismatch, corrupt
// gzip stream) throws purine::Error naming the file's path and the expected and actual values.
// Free functions without shared state: safe to call from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace purine {

struct IdxDataset {
  int64_t count = 0;  // samples
  int rows = 0;
  int cols = 0;
  int classes = 0;              // largest label + 1 (0 for an empty set)
  std::vector<uint8_t> images;  // count * rows * cols pixels, sample after sample, row-major
  std::vector<uint8_t> labels;  // count class indices
};

// The two files of a split as found on disk (".gz" preferred). Throws purine::Error for a split
// other than "train" or "test" and for a missing file.
struct IdxPaths {
  std::string images;
  std::string labels;
};
IdxPaths find_idx_files(const std::string& dir, const std::string& split);

// Reads and validates the whole split.
IdxDataset load_idx_dataset(const std::string& dir, const std::string& split);

// Everything but the pixels, cheaply: both headers, all labels (small), and a check that the
// image data has the right length (the file size, or the gzip trailer's recorded length, with a
// full decompression only when that trailer disagrees). `images` is left empty. Errors are those
// of load_idx_dataset except damage inside a gzip stream whose trailer is intact.
IdxDataset load_idx_metadata(const std::string& dir, const std::string& split);

}  // namespace purine
