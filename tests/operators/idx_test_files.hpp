// Small IDX splits written for a test (the format: operators/cpu/idx_file.hpp): sample i is a 2x2
// image (i, 255 - i, 0, 255) with label i % 3, so the first pixel names it.
#pragma once

#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "temp_dir.hpp"

namespace purine::testing {

inline void put_be32(std::vector<uint8_t>* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<uint8_t>(v >> shift));
}

inline void write_gz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) ==
          static_cast<int>(bytes.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

inline void write_plain(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
  std::fclose(f);
}

inline std::vector<uint8_t> image_bytes(int count) {
  std::vector<uint8_t> out;
  for (uint32_t v : {0x803u, static_cast<uint32_t>(count), 2u, 2u}) put_be32(&out, v);
  for (int i = 0; i < count; ++i) {
    for (int p : {i, 255 - i, 0, 255}) out.push_back(static_cast<uint8_t>(p));
  }
  return out;
}

inline std::vector<uint8_t> label_bytes(int count) {
  std::vector<uint8_t> out;
  put_be32(&out, 0x801u);
  put_be32(&out, static_cast<uint32_t>(count));
  for (int i = 0; i < count; ++i) out.push_back(static_cast<uint8_t>(i % 3));
  return out;
}

// prefix "train" or "t10k" (the test split).
inline void write_dataset(const TempDir& dir, int count, bool gz = true,
                          const std::string& prefix = "train") {
  if (gz) {
    write_gz(dir.file(prefix + "-images-idx3-ubyte.gz"), image_bytes(count));
    write_gz(dir.file(prefix + "-labels-idx1-ubyte.gz"), label_bytes(count));
  } else {
    write_plain(dir.file(prefix + "-images-idx3-ubyte"), image_bytes(count));
    write_plain(dir.file(prefix + "-labels-idx1-ubyte"), label_bytes(count));
  }
}

}  // namespace purine::testing
