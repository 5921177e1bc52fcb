#include "operators/cpu/idx_file.hpp"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "purine/base/error.hpp"

namespace purine {

namespace {

constexpr uint32_t kImageMagic = 0x00000803;
constexpr uint32_t kLabelMagic = 0x00000801;
constexpr int64_t kImageHeaderBytes = 16;
constexpr int64_t kLabelHeaderBytes = 8;
constexpr int64_t kMaxSide = 1 << 16;
constexpr int64_t kMaxPixels = int64_t{1} << 40;

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

// A file read through zlib: gzip streams are decompressed, other files pass through unchanged.
class IdxReader {
 public:
  explicit IdxReader(std::string path) : path_(std::move(path)) {
    file_ = gzopen(path_.c_str(), "rb");
    if (file_ == nullptr) {
      throw Error(str(path_, ": cannot open: ", std::strerror(errno ? errno : ENOMEM)));
    }
    gzbuffer(file_, 1 << 17);
  }
  ~IdxReader() { gzclose(file_); }
  IdxReader(const IdxReader&) = delete;
  IdxReader& operator=(const IdxReader&) = delete;

  const std::string& path() const { return path_; }
  // Whether the file is a gzip stream; valid after the first read.
  bool compressed() { return gzdirect(file_) == 0; }

  // Reads up to n bytes; fewer only at the end of the data (including a gzip stream cut short).
  int64_t read(void* buffer, int64_t n) {
    int64_t done = 0;
    auto* bytes = static_cast<uint8_t*>(buffer);
    while (done < n) {
      unsigned chunk = static_cast<unsigned>(std::min<int64_t>(n - done, 1 << 30));
      int got = gzread(file_, bytes + done, chunk);
      if (got < 0) {
        int code = Z_OK;
        const char* message = gzerror(file_, &code);
        if (code == Z_BUF_ERROR) break;  // "unexpected end of file": a truncated gzip stream
        throw Error(str(path_, ": corrupt gzip data (", message, ")"));
      }
      if (got == 0) break;
      done += got;
    }
    return done;
  }

  // Reads and discards the rest of the data; returns how many bytes there were.
  int64_t skip_to_end() {
    std::vector<uint8_t> scratch(1 << 20);
    int64_t total = 0;
    for (;;) {
      int64_t got = read(scratch.data(), static_cast<int64_t>(scratch.size()));
      total += got;
      if (got < static_cast<int64_t>(scratch.size())) return total;
    }
  }

 private:
  std::string path_;
  gzFile file_ = nullptr;
};

struct ImageHeader {
  int64_t count = 0;
  int rows = 0;
  int cols = 0;
  int64_t data_bytes() const { return count * rows * cols; }
};

ImageHeader read_image_header(IdxReader& in) {
  const std::string& path = in.path();
  uint8_t h[kImageHeaderBytes];
  const int64_t got = in.read(h, kImageHeaderBytes);
  require(got >= 4, path, ": not an IDX image file (expected a 16-byte header, got ", got,
          " bytes)");
  const uint32_t magic = be32(h);
  require(magic == kImageMagic, path, ": not an IDX image file (expected magic ",
          hex32(kImageMagic), ", got ", hex32(magic), ")",
          magic == kLabelMagic ? "; this is an IDX label file" : "");
  require(got == kImageHeaderBytes, path, ": truncated IDX image header (expected ",
          kImageHeaderBytes, " bytes, got ", got, ")");
  const int64_t count = be32(h + 4);
  const int64_t rows = be32(h + 8);
  const int64_t cols = be32(h + 12);
  require(rows >= 1 && cols >= 1 && rows <= kMaxSide && cols <= kMaxSide, path, ": image size ",
          rows, "x", cols, " is out of range (expected 1..", kMaxSide, " each)");
  require(count <= kMaxPixels / (rows * cols), path, ": ", count, " images of ", rows, "x", cols,
          " are more than this reader supports (", kMaxPixels, " pixels)");
  return {count, static_cast<int>(rows), static_cast<int>(cols)};
}

std::string image_data_description(const ImageHeader& header) {
  return str(header.count, " images of ", header.rows, "x", header.cols);
}

// Throws unless `actual` bytes of image data follow the header, as the header says.
void check_image_data_length(const std::string& path, const ImageHeader& header, int64_t actual) {
  const int64_t expected = header.data_bytes();
  require(actual >= expected, path, ": truncated image data (expected ", expected,
          " bytes after the header for ", image_data_description(header), ", got ", actual, ")");
  require(actual == expected, path, ": ", actual - expected, " bytes of trailing data after the ",
          expected, " bytes of ", image_data_description(header),
          "; the file is damaged or not what its header says");
}

// The length a gzip file records in its trailer (modulo 2^32), or -1 if unreadable.
int64_t gzip_trailer_length(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return -1;
  uint8_t t[4];
  bool ok = std::fseek(file, -4, SEEK_END) == 0 && std::fread(t, 1, 4, file) == 4;
  std::fclose(file);
  if (!ok) return -1;
  return int64_t{t[0]} | (int64_t{t[1]} << 8) | (int64_t{t[2]} << 16) | (int64_t{t[3]} << 24);
}

// Checks the image data length without reading it where possible; `in` is past the header.
void check_image_data_cheaply(IdxReader& in, const ImageHeader& header) {
  const std::string& path = in.path();
  const int64_t total = kImageHeaderBytes + header.data_bytes();
  if (!in.compressed()) {
    struct stat info;
    require(::stat(path.c_str(), &info) == 0, path, ": cannot stat: ", std::strerror(errno));
    check_image_data_length(path, header, static_cast<int64_t>(info.st_size) - kImageHeaderBytes);
    return;
  }
  // A single-member gzip file records its length; a cut-off file ends in arbitrary bytes. Only
  // when the record disagrees (a damaged or a multi-member file) is the data counted in full.
  if (gzip_trailer_length(path) == (total & 0xffffffff)) return;
  check_image_data_length(path, header, in.skip_to_end());
}

// Reads the label file completely; sets count, classes and labels.
void read_labels(const std::string& path, IdxDataset* out) {
  IdxReader in(path);
  uint8_t h[kLabelHeaderBytes];
  const int64_t got = in.read(h, kLabelHeaderBytes);
  require(got >= 4, path, ": not an IDX label file (expected an 8-byte header, got ", got,
          " bytes)");
  const uint32_t magic = be32(h);
  require(magic == kLabelMagic, path, ": not an IDX label file (expected magic ",
          hex32(kLabelMagic), ", got ", hex32(magic), ")",
          magic == kImageMagic ? "; this is an IDX image file" : "");
  require(got == kLabelHeaderBytes, path, ": truncated IDX label header (expected ",
          kLabelHeaderBytes, " bytes, got ", got, ")");
  const int64_t count = be32(h + 4);
  out->count = count;
  out->labels.resize(static_cast<size_t>(count));
  const int64_t read = in.read(out->labels.data(), count);
  require(read == count, path, ": truncated label data (expected ", count, " bytes for ", count,
          " labels, got ", read, ")");
  uint8_t extra = 0;
  if (in.read(&extra, 1) != 0) {
    const int64_t trailing = 1 + in.skip_to_end();
    throw Error(str(path, ": ", trailing, " bytes of trailing data after the ", count,
                    " labels; the file is damaged or not what its header says"));
  }
  int largest = -1;
  for (uint8_t label : out->labels) largest = std::max<int>(largest, label);
  out->classes = largest + 1;
}

IdxDataset load(const std::string& dir, const std::string& split, bool with_images) {
  const IdxPaths paths = find_idx_files(dir, split);
  IdxDataset out;
  IdxReader images(paths.images);
  const ImageHeader header = read_image_header(images);
  read_labels(paths.labels, &out);
  require(header.count == out.count, paths.images, " has ", header.count, " images but ",
          paths.labels, " has ", out.count,
          " labels; expected equal counts (are both files from the same split?)");
  out.rows = header.rows;
  out.cols = header.cols;
  if (!with_images) {
    check_image_data_cheaply(images, header);
    return out;
  }
  out.images.resize(static_cast<size_t>(header.data_bytes()));
  int64_t got = images.read(out.images.data(), header.data_bytes());
  if (got == header.data_bytes()) got += images.skip_to_end();
  check_image_data_length(paths.images, header, got);
  return out;
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

}  // namespace purine
