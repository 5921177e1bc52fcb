// How one fuzz input becomes a pair of IDX files for parse_idx, shared by the libFuzzer target
// (idx_fuzz.cpp) and the corpus replay test (tests/operators/test_fuzz_corpus.cpp):
//   byte 0      bit 0 set: load the pixels (load_idx_dataset), clear: metadata only
//               bit 1 / bit 2 set: gzip the image / label file first, so that mutations of the
//               content also reach the parser through valid gzip streams
//   bytes 1-2   the image file's length, little-endian (cut to what the input holds)
//   then        the image file, then the label file (each raw or gzip, as on disk)
// Throws purine::Error for any bad input; anything else that escapes is a bug.
#pragma once

#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "operators/cpu/idx_file.hpp"

namespace purine::fuzz {

// `bytes` as a single-member gzip file.
inline std::vector<uint8_t> gzip_bytes(const uint8_t* bytes, size_t size) {
  z_stream z{};
  if (deflateInit2(&z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    __builtin_trap();
  }
  std::vector<uint8_t> out(deflateBound(&z, size));
  z.next_in = const_cast<uint8_t*>(bytes);
  z.avail_in = static_cast<unsigned>(size);
  z.next_out = out.data();
  z.avail_out = static_cast<unsigned>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) __builtin_trap();
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

inline void run_idx_input(const uint8_t* data, size_t size) {
  if (size < 3) return;
  const bool with_images = (data[0] & 1) != 0;
  const size_t image_size = std::min<size_t>(data[1] | (size_t{data[2]} << 8), size - 3);
  IdxBuffer images{"images", data + 3, image_size};
  IdxBuffer labels{"labels", data + 3 + image_size, size - 3 - image_size};
  std::vector<uint8_t> gzipped_images, gzipped_labels;
  if (data[0] & 2) {
    gzipped_images = gzip_bytes(images.data, images.size);
    images = {images.name, gzipped_images.data(), gzipped_images.size()};
  }
  if (data[0] & 4) {
    gzipped_labels = gzip_bytes(labels.data, labels.size);
    labels = {labels.name, gzipped_labels.data(), gzipped_labels.size()};
  }
  const IdxDataset d = parse_idx(images, labels, with_images);
  // What a successful parse promises.
  if (d.labels.size() != static_cast<size_t>(d.count) ||
      (with_images && d.images.size() != static_cast<size_t>(d.count * d.rows * d.cols))) {
    __builtin_trap();
  }
}

}  // namespace purine::fuzz
