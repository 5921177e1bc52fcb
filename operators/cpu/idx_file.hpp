// IDX files, the format of MNIST and Fashion-MNIST: one image file and one label file per split,
//   <dir>/train-images-idx3-ubyte[.gz]  <dir>/train-labels-idx1-ubyte[.gz]   (split "train")
//   <dir>/t10k-images-idx3-ubyte[.gz]   <dir>/t10k-labels-idx1-ubyte[.gz]    (split "test")
// Each file is read gzip-compressed when the ".gz" name exists, else uncompressed under the name
// without ".gz" (either way the content decides: gzip data is recognised by its magic). Headers
// are big-endian: images hold magic 0x00000803, count, rows, cols and then count*rows*cols
// unsigned bytes; labels hold magic 0x00000801, count and count bytes.
// Every problem (missing file, wrong magic, truncated or trailing data, count mismatch, corrupt
// or cut-off gzip stream) throws purine::Error naming the file's path and the expected and
// actual values. Memory grows with the data actually read, in chunks of a few MiB, never with
// what a header or a gzip trailer claims, so a damaged file cannot make the reader allocate more
// than the data it holds.
// Free functions without shared state: safe to call from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace purine {

struct IdxDataset {
  std::string images_file;  // the paths read (the names given, for data read from memory)
  std::string labels_file;
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

// Everything but the pixels: both headers, all labels (small), and a check that exactly the
// image data the header announces is there (read through and counted, not kept). `images` is
// left empty. The errors are those of load_idx_dataset.
IdxDataset load_idx_metadata(const std::string& dir, const std::string& split);

// Two IDX files held in memory exactly as they lie on disk (gzip-compressed or not); `name`
// stands for the path in messages. parse_idx reads them as load_idx_dataset (with_images) or
// load_idx_metadata (!with_images) read files, with the same checks. For tests and fuzzing.
struct IdxBuffer {
  std::string name;
  const uint8_t* data = nullptr;
  size_t size = 0;
};
IdxDataset parse_idx(const IdxBuffer& images, const IdxBuffer& labels, bool with_images);

// Throws purine::Error naming data.labels_file, the first record whose label is not below
// `classes`, and its label.
void check_idx_labels(const IdxDataset& data, int classes);

}  // namespace purine
