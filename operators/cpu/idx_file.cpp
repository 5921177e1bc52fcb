#include "operators/cpu/idx_file.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "base/error.hpp"
#include "operators/cpu/byte_stream.hpp"

namespace purine {

namespace {

constexpr uint32_t kImageMagic = 0x00000803;
constexpr uint32_t kLabelMagic = 0x00000801;
constexpr int64_t kImageHeaderBytes = 16;
constexpr int64_t kLabelHeaderBytes = 8;
constexpr int64_t kMaxSide = 1 << 16;
constexpr int64_t kMaxPixels = int64_t{1} << 40;
constexpr int64_t kChunkBytes = int64_t{4} << 20;

std::string hex32(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", value);
  return text;
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

bool is_regular_file(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

std::string resolve(const std::string& dir, const std::string& name) {
  std::string base = name;
  if (!dir.empty()) base = dir.back() == '/' ? dir + name : dir + "/" + name;
  if (is_regular_file(base + ".gz")) return base + ".gz";
  if (is_regular_file(base)) return base;
  throw Error(str("no such file: ", base, ".gz (nor uncompressed ", base,
                  "); install dataset-fashion-mnist or pass --data=DIR"));
}

// Reads up to `expected` bytes into *out; returns the count read. The data goes into chunks of a
// few MiB as it arrives and is assembled into *out at the end, so a header's claim alone never
// allocates more than one chunk (and growing a single buffer would copy it over and over).
int64_t read_up_to(ByteStream& in, int64_t expected, std::vector<uint8_t>* out) {
  std::vector<std::vector<uint8_t>> chunks;
  int64_t got = 0;
  while (got < expected) {
    const int64_t step = std::min(kChunkBytes, expected - got);
    chunks.emplace_back(static_cast<size_t>(step));
    const int64_t read = in.read(chunks.back().data(), step);
    chunks.back().resize(static_cast<size_t>(read));
    got += read;
    if (read < step) break;
  }
  out->clear();
  if (chunks.size() == 1) {
    out->swap(chunks.front());
  } else {
    out->reserve(static_cast<size_t>(got));
    for (std::vector<uint8_t>& chunk : chunks) {
      out->insert(out->end(), chunk.begin(), chunk.end());
      std::vector<uint8_t>().swap(chunk);
    }
  }
  return got;
}

struct ImageHeader {
  int64_t count = 0;
  int rows = 0;
  int cols = 0;
  int64_t data_bytes() const { return count * rows * cols; }
};

// Reads the `bytes`-byte header of an IDX image or label file (`image`) into `h` and checks its
// magic number, naming the other kind of file where it is one.
void read_header(ByteStream& in, bool image, uint8_t* h, int64_t bytes) {
  const std::string& path = in.name();
  const char* kind = image ? "image" : "label";
  const uint32_t wanted = image ? kImageMagic : kLabelMagic;
  const uint32_t other = image ? kLabelMagic : kImageMagic;
  const int64_t got = in.read(h, bytes);
  require(got >= 4, path, ": not an IDX ", kind, " file (expected a header of ", bytes,
          " bytes, got ", got, ")");
  const uint32_t magic = be32(h);
  require(magic == wanted, path, ": not an IDX ", kind, " file (expected magic ", hex32(wanted),
          ", got ", hex32(magic), ")",
          magic == other ? str("; this is an IDX ", image ? "label" : "image", " file") : "");
  require(got == bytes, path, ": truncated IDX ", kind, " header (expected ", bytes, " bytes, got ",
          got, ")");
}

ImageHeader read_image_header(ByteStream& in) {
  const std::string& path = in.name();
  uint8_t h[kImageHeaderBytes];
  read_header(in, true, h, kImageHeaderBytes);
  const int64_t count = be32(h + 4);
  const int64_t rows = be32(h + 8);
  const int64_t cols = be32(h + 12);
  require(rows >= 1 && cols >= 1 && rows <= kMaxSide && cols <= kMaxSide, path, ": image size ",
          rows, "x", cols, " is out of range (expected 1..", kMaxSide, " each)");
  require(count <= kMaxPixels / (rows * cols), path, ": ", count, " images of ", rows, "x", cols,
          " are more than this reader supports (", kMaxPixels, " pixels)");
  return {count, static_cast<int>(rows), static_cast<int>(cols)};
}

// Throws unless exactly the image data the header announces followed it (`actual` bytes) and a
// gzip stream ended properly.
void check_image_data(ByteStream& in, const ImageHeader& header, int64_t actual) {
  const std::string& path = in.name();
  const int64_t expected = header.data_bytes();
  const std::string what = str(header.count, " images of ", header.rows, "x", header.cols);
  require(actual >= expected, path, ": truncated image data (expected ", expected,
          " bytes after the header for ", what, ", got ", actual, ")");
  require(actual == expected, path, ": ", actual - expected, " bytes of trailing data after the ",
          expected, " bytes of ", what, "; the file is damaged or not what its header says");
  in.check_complete();
}

// Reads the label file completely; sets count, classes and labels.
void read_labels(ByteStream& in, IdxDataset* out) {
  const std::string& path = in.name();
  uint8_t h[kLabelHeaderBytes];
  read_header(in, false, h, kLabelHeaderBytes);
  const int64_t count = be32(h + 4);
  out->count = count;
  const int64_t read = read_up_to(in, count, &out->labels);
  require(read == count, path, ": truncated label data (expected ", count, " bytes for ", count,
          " labels, got ", read, ")");
  const int64_t trailing = in.skip_to_end();
  require(trailing == 0, path, ": ", trailing, " bytes of trailing data after the ", count,
          " labels; the file is damaged or not what its header says");
  in.check_complete();
  int largest = -1;
  for (uint8_t label : out->labels) largest = std::max<int>(largest, label);
  out->classes = largest + 1;
}

IdxDataset parse(ByteStream& images, ByteStream& labels, bool with_images) {
  IdxDataset out;
  out.images_file = images.name();
  out.labels_file = labels.name();
  const ImageHeader header = read_image_header(images);
  read_labels(labels, &out);
  require(header.count == out.count, images.name(), " has ", header.count, " images but ",
          labels.name(), " has ", out.count,
          " labels; expected equal counts (are both files from the same split?)");
  out.rows = header.rows;
  out.cols = header.cols;
  int64_t got = 0;
  if (with_images) {
    got = read_up_to(images, header.data_bytes(), &out.images);
    if (got == header.data_bytes()) got += images.skip_to_end();
  } else {
    got = images.skip_to_end();  // counted, not kept
  }
  check_image_data(images, header, got);
  return out;
}

IdxDataset load(const std::string& dir, const std::string& split, bool with_images) {
  const IdxPaths paths = find_idx_files(dir, split);
  std::unique_ptr<ByteStream> images = ByteStream::open_file(paths.images);
  std::unique_ptr<ByteStream> labels = ByteStream::open_file(paths.labels);
  return parse(*images, *labels, with_images);
}

}  // namespace

IdxPaths find_idx_files(const std::string& dir, const std::string& split) {
  require(split == "train" || split == "test", "IDX data: split '", split,
          "' is unknown; expected 'train' or 'test'");
  const std::string prefix = split == "train" ? "train" : "t10k";
  return {resolve(dir, prefix + "-images-idx3-ubyte"), resolve(dir, prefix + "-labels-idx1-ubyte")};
}

IdxDataset load_idx_dataset(const std::string& dir, const std::string& split) {
  return load(dir, split, true);
}

IdxDataset load_idx_metadata(const std::string& dir, const std::string& split) {
  return load(dir, split, false);
}

IdxDataset parse_idx(const IdxBuffer& images, const IdxBuffer& labels, bool with_images) {
  std::unique_ptr<ByteStream> image_stream =
      ByteStream::from_memory(images.name, images.data, images.size);
  std::unique_ptr<ByteStream> label_stream =
      ByteStream::from_memory(labels.name, labels.data, labels.size);
  return parse(*image_stream, *label_stream, with_images);
}

void check_idx_labels(const IdxDataset& data, int classes) {
  for (size_t i = 0; i < data.labels.size(); ++i) {
    require(data.labels[i] < classes, data.labels_file, ": label of record ", i, " is ",
            int{data.labels[i]}, ", expected below ", classes,
            " classes (is the number of classes right for this data set?)");
  }
}

}  // namespace purine
