#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "operators/cpu/idx_file.hpp"
#include "temp_dir.hpp"

namespace purine {
namespace {

using testing::TempDir;

void put_be32(std::vector<uint8_t>* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<uint8_t>(v >> shift));
}

std::vector<uint8_t> image_bytes(uint32_t count, uint32_t rows, uint32_t cols,
                                 uint32_t magic = 0x803) {
  std::vector<uint8_t> out;
  put_be32(&out, magic);
  put_be32(&out, count);
  put_be32(&out, rows);
  put_be32(&out, cols);
  for (uint32_t i = 0; i < count * rows * cols; ++i) out.push_back(static_cast<uint8_t>(i * 7));
  return out;
}

std::vector<uint8_t> label_bytes(const std::vector<uint8_t>& labels, uint32_t magic = 0x801) {
  std::vector<uint8_t> out;
  put_be32(&out, magic);
  put_be32(&out, static_cast<uint32_t>(labels.size()));
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

void write_plain(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
  std::fclose(f);
}

// mode "wb" starts a file, "ab" appends another gzip member.
void write_gz(const std::string& path, const std::vector<uint8_t>& bytes, const char* mode = "wb") {
  gzFile f = gzopen(path.c_str(), mode);
  REQUIRE(f != nullptr);
  if (!bytes.empty()) {
    REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) ==
            static_cast<int>(bytes.size()));
  }
  REQUIRE(gzclose(f) == Z_OK);
}

void write(const std::string& path, const std::vector<uint8_t>& bytes, bool gz) {
  if (gz) {
    write_gz(path + ".gz", bytes);
  } else {
    write_plain(path, bytes);
  }
}

std::vector<uint8_t> read_plain(const std::string& path) {
  std::vector<uint8_t> bytes;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  int c;
  while ((c = std::fgetc(f)) != EOF) bytes.push_back(static_cast<uint8_t>(c));
  std::fclose(f);
  return bytes;
}

// Both loaders report the same file errors.
using Loader = IdxDataset (*)(const std::string&, const std::string&);
const Loader kLoaders[] = {&load_idx_dataset, &load_idx_metadata};

const std::vector<uint8_t> kLabels = {3, 0, 5, 1, 0};  // 5 samples, 6 classes

void write_split(const TempDir& dir, const std::string& prefix, bool gz) {
  write(dir.file(prefix + "-images-idx3-ubyte"), image_bytes(5, 3, 2), gz);
  write(dir.file(prefix + "-labels-idx1-ubyte"), label_bytes(kLabels), gz);
}

// The gzip file format stores the data's length (mod 2^32) in its last 4 bytes, little-endian.
void forge_gzip_length(const std::string& path, uint32_t length) {
  std::vector<uint8_t> compressed = read_plain(path);
  for (int i = 0; i < 4; ++i) compressed[compressed.size() - 4 + i] = uint8_t(length >> (8 * i));
  write_plain(path, compressed);
}

// The process's peak resident memory so far, in MiB.
int64_t peak_rss_mib() {
  struct rusage usage;
  REQUIRE(::getrusage(RUSAGE_SELF, &usage) == 0);
  return usage.ru_maxrss / 1024;
}

void check_synthetic(const IdxDataset& d) {
  CHECK(d.count == 5);
  CHECK(d.rows == 3);
  CHECK(d.cols == 2);
  CHECK(d.classes == 6);
  CHECK(d.labels == kLabels);
  REQUIRE(d.images.size() == 30);
  for (size_t i = 0; i < d.images.size(); ++i) CHECK(d.images[i] == static_cast<uint8_t>(i * 7));
}

}  // namespace

TEST_CASE("idx_file: loads gzip-compressed files", "[idx_file]") {
  TempDir dir;
  write_split(dir, "train", true);
  check_synthetic(load_idx_dataset(dir.path(), "train"));
  IdxPaths paths = find_idx_files(dir.path(), "train");
  CHECK(paths.images == dir.file("train-images-idx3-ubyte.gz"));
  CHECK(paths.labels == dir.file("train-labels-idx1-ubyte.gz"));
}

TEST_CASE("idx_file: loads uncompressed files", "[idx_file]") {
  TempDir dir;
  write_split(dir, "train", false);
  check_synthetic(load_idx_dataset(dir.path(), "train"));
  check_synthetic(load_idx_dataset(dir.path() + "/", "train"));
}

TEST_CASE("idx_file: the test split reads the t10k files", "[idx_file]") {
  TempDir dir;
  write_split(dir, "t10k", true);
  check_synthetic(load_idx_dataset(dir.path(), "test"));
  REQUIRE_THROWS_WITH(load_idx_dataset(dir.path(), "train"),
                      Catch::Contains("no such file: " + dir.file("train-images-idx3-ubyte.gz")));
}

TEST_CASE("idx_file: prefers the .gz file when both exist", "[idx_file]") {
  TempDir dir;
  write_split(dir, "train", true);
  write(dir.file("train-images-idx3-ubyte"), image_bytes(2, 1, 1), false);
  write(dir.file("train-labels-idx1-ubyte"), label_bytes({1, 1}), false);
  check_synthetic(load_idx_dataset(dir.path(), "train"));
}

TEST_CASE("idx_file: metadata has everything but the pixels", "[idx_file]") {
  for (bool gz : {true, false}) {
    TempDir dir;
    write_split(dir, "train", gz);
    IdxDataset meta = load_idx_metadata(dir.path(), "train");
    CHECK(meta.count == 5);
    CHECK(meta.rows == 3);
    CHECK(meta.cols == 2);
    CHECK(meta.classes == 6);
    CHECK(meta.labels == kLabels);
    CHECK(meta.images.empty());
  }
}

TEST_CASE("idx_file: accepts a multi-member gzip file", "[idx_file]") {
  TempDir dir;
  std::vector<uint8_t> bytes = image_bytes(5, 3, 2);
  const std::string images = dir.file("train-images-idx3-ubyte.gz");
  write_gz(images, std::vector<uint8_t>(bytes.begin(), bytes.begin() + 20));
  write_gz(images, std::vector<uint8_t>(bytes.begin() + 20, bytes.end()), "ab");
  write(dir.file("train-labels-idx1-ubyte"), label_bytes(kLabels), true);
  CHECK(load_idx_metadata(dir.path(), "train").count == 5);
  check_synthetic(load_idx_dataset(dir.path(), "train"));
}

TEST_CASE("idx_file: a missing file names the path and the package", "[idx_file]") {
  TempDir dir;
  const std::string images = dir.file("train-images-idx3-ubyte.gz");
  REQUIRE_THROWS_WITH(load_idx_dataset(dir.path(), "train"),
                      Catch::Contains("no such file: " + images) &&
                          Catch::Contains("install dataset-fashion-mnist or pass --data=DIR"));
  REQUIRE_THROWS_WITH(load_idx_metadata(dir.path() + "/nowhere", "train"),
                      Catch::Contains("no such file: " + dir.path() + "/nowhere/train-images"));
  write(dir.file("train-images-idx3-ubyte"), image_bytes(5, 3, 2), true);
  REQUIRE_THROWS_WITH(load_idx_dataset(dir.path(), "train"),
                      Catch::Contains("no such file: " + dir.file("train-labels-idx1-ubyte.gz")));
}

TEST_CASE("idx_file: an unknown split is an error", "[idx_file]") {
  REQUIRE_THROWS_WITH(load_idx_dataset("/tmp", "valid"),
                      Catch::Contains("split 'valid'") && Catch::Contains("'train' or 'test'"));
}

TEST_CASE("idx_file: wrong magic numbers name the file", "[idx_file]") {
  for (bool gz : {true, false}) {
    TempDir dir;
    const std::string suffix = gz ? ".gz" : "";
    write(dir.file("train-images-idx3-ubyte"), label_bytes(kLabels), gz);
    write(dir.file("train-labels-idx1-ubyte"), label_bytes(kLabels), gz);
    REQUIRE_THROWS_WITH(
        load_idx_dataset(dir.path(), "train"),
        Catch::Contains(dir.file("train-images-idx3-ubyte" + suffix)) &&
            Catch::Contains("not an IDX image file (expected magic 0x00000803, got 0x00000801)"));

    write(dir.file("train-images-idx3-ubyte"), image_bytes(5, 3, 2), gz);
    write(dir.file("train-labels-idx1-ubyte"), image_bytes(5, 3, 2, 0x12345678), gz);
    REQUIRE_THROWS_WITH(
        load_idx_metadata(dir.path(), "train"),
        Catch::Contains(dir.file("train-labels-idx1-ubyte" + suffix)) &&
            Catch::Contains("not an IDX label file (expected magic 0x00000801, got 0x12345678)"));
  }
}

TEST_CASE("idx_file: truncated files name the file and the byte counts", "[idx_file]") {
  for (bool gz : {true, false}) {
    TempDir dir;
    const std::string images =
        dir.file(gz ? "train-images-idx3-ubyte.gz" : "train-images-idx3-ubyte");
    std::vector<uint8_t> bytes = image_bytes(5, 3, 2);
    bytes.resize(bytes.size() - 4);
    write(dir.file("train-images-idx3-ubyte"), bytes, gz);
    write(dir.file("train-labels-idx1-ubyte"), label_bytes(kLabels), gz);
    for (auto load : kLoaders) {
      REQUIRE_THROWS_WITH(load(dir.path(), "train"),
                          Catch::Contains(images) &&
                              Catch::Contains("truncated image data (expected 30 bytes") &&
                              Catch::Contains("got 26)"));
    }

    bytes.resize(10);
    write(dir.file("train-images-idx3-ubyte"), bytes, gz);
    REQUIRE_THROWS_WITH(
        load_idx_metadata(dir.path(), "train"),
        Catch::Contains(images) &&
            Catch::Contains("truncated IDX image header (expected 16 bytes, got 10)"));
  }
}

TEST_CASE("idx_file: a gzip file cut short is reported as truncated", "[idx_file]") {
  TempDir dir;
  std::vector<uint8_t> bytes = image_bytes(400, 10, 10);  // 40000 pixels
  for (size_t i = 16; i < bytes.size(); ++i)
    bytes[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  const std::string images = dir.file("train-images-idx3-ubyte.gz");
  write_gz(images, bytes);
  std::vector<uint8_t> compressed = read_plain(images);
  compressed.resize(compressed.size() / 2);
  write_plain(images, compressed);
  write(dir.file("train-labels-idx1-ubyte"), label_bytes(std::vector<uint8_t>(400, 2)), true);
  for (auto load : kLoaders) {
    REQUIRE_THROWS_WITH(
        load(dir.path(), "train"),
        Catch::Contains(images) && Catch::Contains("truncated image data (expected 40000 bytes"));
  }
}

TEST_CASE("idx_file: trailing data is an error", "[idx_file]") {
  TempDir dir;
  std::vector<uint8_t> bytes = image_bytes(5, 3, 2);
  bytes.push_back(1);
  bytes.push_back(2);
  write(dir.file("train-images-idx3-ubyte"), bytes, false);
  write(dir.file("train-labels-idx1-ubyte"), label_bytes(kLabels), false);
  for (auto load : kLoaders) {
    REQUIRE_THROWS_WITH(load(dir.path(), "train"),
                        Catch::Contains(dir.file("train-images-idx3-ubyte")) &&
                            Catch::Contains("2 bytes of trailing data"));
  }
}

TEST_CASE("idx_file: image and label counts must agree", "[idx_file]") {
  TempDir dir;
  write(dir.file("train-images-idx3-ubyte"), image_bytes(5, 3, 2), true);
  write(dir.file("train-labels-idx1-ubyte"), label_bytes({1, 2, 3, 4}), true);
  REQUIRE_THROWS_WITH(
      load_idx_metadata(dir.path(), "train"),
      Catch::Contains(dir.file("train-images-idx3-ubyte.gz") + " has 5 images") &&
          Catch::Contains(dir.file("train-labels-idx1-ubyte.gz") + " has 4 labels"));
}

TEST_CASE("idx_file: truncated labels name the file", "[idx_file]") {
  TempDir dir;
  std::vector<uint8_t> labels = label_bytes(kLabels);
  labels.pop_back();
  write(dir.file("train-images-idx3-ubyte"), image_bytes(5, 3, 2), false);
  write(dir.file("train-labels-idx1-ubyte"), labels, false);
  REQUIRE_THROWS_WITH(load_idx_dataset(dir.path(), "train"),
                      Catch::Contains(dir.file("train-labels-idx1-ubyte")) &&
                          Catch::Contains("truncated label data (expected 5 bytes") &&
                          Catch::Contains("got 4)"));
}

TEST_CASE("idx_file: parse_idx reads memory as the loaders read files", "[idx_file]") {
  for (bool gz : {true, false}) {
    TempDir dir;
    write_split(dir, "train", gz);
    const IdxPaths paths = find_idx_files(dir.path(), "train");
    const std::vector<uint8_t> images = read_plain(paths.images);
    const std::vector<uint8_t> labels = read_plain(paths.labels);
    const IdxBuffer image_buffer{"images.gz", images.data(), images.size()};
    const IdxBuffer label_buffer{"labels.gz", labels.data(), labels.size()};
    IdxDataset all = parse_idx(image_buffer, label_buffer, true);
    check_synthetic(all);
    CHECK(all.images_file == "images.gz");
    CHECK(all.labels_file == "labels.gz");
    IdxDataset meta = parse_idx(image_buffer, label_buffer, false);
    CHECK(meta.count == 5);
    CHECK(meta.images.empty());
    CHECK(load_idx_dataset(dir.path(), "train").labels_file == paths.labels);
    const IdxBuffer cut{"cut", images.data(), images.size() - 1};
    REQUIRE_THROWS_WITH(parse_idx(cut, label_buffer, true), Catch::StartsWith("cut: "));
  }
}

TEST_CASE("idx_file: forged headers are errors without a large allocation", "[idx_file]") {
  for (bool gz : {true, false}) {
    TempDir dir;
    const std::string suffix = gz ? ".gz" : "";
    const int64_t peak_before = peak_rss_mib();
    // 2^31 labels announced, 92 there.
    write(dir.file("train-images-idx3-ubyte"), image_bytes(5, 3, 2), gz);
    std::vector<uint8_t> labels = label_bytes(std::vector<uint8_t>(92, 1));
    labels[4] = 0x80, labels[7] = 0;
    write(dir.file("train-labels-idx1-ubyte"), labels, gz);
    for (auto load : kLoaders) {
      REQUIRE_THROWS_WITH(load(dir.path(), "train"),
                          Catch::Contains(dir.file("train-labels-idx1-ubyte" + suffix) +
                                          ": truncated label data (expected 2147483648 bytes "
                                          "for 2147483648 labels, got 92)"));
    }
    // 5 images of 65536x65536 (20 GiB) announced, 30 bytes there.
    write(dir.file("train-labels-idx1-ubyte"), label_bytes(kLabels), gz);
    std::vector<uint8_t> images = image_bytes(5, 3, 2);
    images[9] = images[13] = 1;  // rows = cols = 0x10000
    images[10] = images[11] = images[14] = images[15] = 0;
    write(dir.file("train-images-idx3-ubyte"), images, gz);
    for (auto load : kLoaders) {
      REQUIRE_THROWS_WITH(load(dir.path(), "train"),
                          Catch::Contains(dir.file("train-images-idx3-ubyte" + suffix) +
                                          ": truncated image data (expected 21474836480 bytes "
                                          "after the header for 5 images of 65536x65536, got 30)"));
    }
    CHECK(peak_rss_mib() - peak_before < 64);
  }
}

TEST_CASE("idx_file: a forged gzip length trailer promises nothing", "[idx_file]") {
  // The header claims 100000 images, the gzip trailer the length that would go with them; the
  // data holds 5.
  TempDir dir;
  std::vector<uint8_t> images = image_bytes(5, 3, 2);
  images[5] = 0x01, images[6] = 0x86, images[7] = 0xa0;  // 100000
  const std::string path = dir.file("train-images-idx3-ubyte.gz");
  write_gz(path, images);
  forge_gzip_length(path, 16 + 100000 * 6);
  write(dir.file("train-labels-idx1-ubyte"), label_bytes(std::vector<uint8_t>(100000, 1)), true);
  for (auto load : kLoaders) {
    REQUIRE_THROWS_WITH(load(dir.path(), "train"),
                        Catch::Contains(path + ": corrupt gzip data after 46 decompressed bytes "
                                               "(incorrect length check)"));
  }
  // A forged trailer on data that is otherwise right is an error too.
  write_split(dir, "train", true);
  forge_gzip_length(dir.file("train-labels-idx1-ubyte.gz"), 1000);
  REQUIRE_THROWS_WITH(load_idx_metadata(dir.path(), "train"),
                      Catch::Contains(dir.file("train-labels-idx1-ubyte.gz")) &&
                          Catch::Contains("incorrect length check"));
}

TEST_CASE("idx_file: a gzip file cut off in its trailer is truncated", "[idx_file]") {
  for (const std::string name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"}) {
    TempDir dir;
    write_split(dir, "train", true);
    std::vector<uint8_t> compressed = read_plain(dir.file(name));
    compressed.resize(compressed.size() - 8);  // the data is complete, CRC and length are not
    write_plain(dir.file(name), compressed);
    const std::string decompressed = name[6] == 'i' ? "46" : "13";
    for (auto load : kLoaders) {
      REQUIRE_THROWS_WITH(load(dir.path(), "train"),
                          Catch::Contains(dir.file(name) + ": the gzip stream is cut off after " +
                                          decompressed + " decompressed bytes"));
    }
  }
}

TEST_CASE("idx_file: trailing bytes inside and after a gzip stream are errors", "[idx_file]") {
  TempDir dir;
  write_split(dir, "train", true);
  std::vector<uint8_t> labels = label_bytes(kLabels);
  labels.push_back(7);
  write_gz(dir.file("train-labels-idx1-ubyte.gz"), labels);
  for (auto load : kLoaders) {
    REQUIRE_THROWS_WITH(load(dir.path(), "train"),
                        Catch::Contains(dir.file("train-labels-idx1-ubyte.gz") +
                                        ": 1 bytes of trailing data after the 5 labels"));
  }
  write_split(dir, "train", true);
  const std::string images = dir.file("train-images-idx3-ubyte.gz");
  std::vector<uint8_t> compressed = read_plain(images);
  for (uint8_t junk : {0, 1, 2}) compressed.push_back(junk);
  write_plain(images, compressed);
  for (auto load : kLoaders) {
    REQUIRE_THROWS_WITH(load(dir.path(), "train"),
                        Catch::Contains(images + ": the data after the end of the gzip stream "
                                                 "(after 46 decompressed bytes) is not gzip data"));
  }
  compressed.resize(compressed.size() - 2);  // one byte: not even a gzip header
  write_plain(images, compressed);
  REQUIRE_THROWS_WITH(load_idx_dataset(dir.path(), "train"),
                      Catch::Contains(images + ": the data after the end of the gzip stream "
                                               "(after 46 decompressed bytes) is not a complete"));
}

TEST_CASE("idx_file: check_idx_labels names the file, the record and the label", "[idx_file]") {
  TempDir dir;
  write_split(dir, "train", true);
  const IdxDataset data = load_idx_metadata(dir.path(), "train");
  check_idx_labels(data, 6);
  REQUIRE_THROWS_WITH(check_idx_labels(data, 5),
                      Catch::StartsWith(dir.file("train-labels-idx1-ubyte.gz") +
                                        ": label of record 2 is 5, expected below 5 classes"));
  REQUIRE_THROWS_WITH(check_idx_labels(data, 3),
                      Catch::Contains("label of record 0 is 3, expected below 3 classes"));
}

TEST_CASE("idx_file: loads the installed Fashion-MNIST training set", "[idx_file]") {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  struct stat info;
  if (::stat(dir.c_str(), &info) != 0) {
    WARN("skipped: " << dir << " is not installed (Debian package dataset-fashion-mnist)");
    return;
  }
  IdxDataset train = load_idx_dataset(dir, "train");
  CHECK(train.count == 60000);
  CHECK(train.rows == 28);
  CHECK(train.cols == 28);
  CHECK(train.classes == 10);
  CHECK(train.images.size() == size_t{60000} * 28 * 28);
  CHECK(train.labels.size() == 60000);
  IdxDataset test = load_idx_metadata(dir, "test");
  CHECK(test.count == 10000);
  CHECK(test.classes == 10);
}

}  // namespace purine
