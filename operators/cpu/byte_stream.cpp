#include "operators/cpu/byte_stream.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "base/error.hpp"

namespace purine {

namespace {
constexpr size_t kInputBytes = size_t{1} << 18;
// zlib counts in unsigned int; hand it at most this much at a time.
constexpr int64_t kMaxStep = int64_t{1} << 30;
}  // namespace

std::unique_ptr<ByteStream> ByteStream::open_file(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) throw Error(str(path, ": cannot open: ", std::strerror(errno)));
  return std::unique_ptr<ByteStream>(new ByteStream(path, file, nullptr, 0));
}

std::unique_ptr<ByteStream> ByteStream::from_memory(std::string name, const uint8_t* data,
                                                    size_t size) {
  return std::unique_ptr<ByteStream>(new ByteStream(std::move(name), nullptr, data, size));
}

ByteStream::ByteStream(std::string name, std::FILE* file, const uint8_t* data, size_t size)
    : name_(std::move(name)), file_(file), memory_(data), memory_left_(size) {
  if (file_ != nullptr) input_.resize(kInputBytes);
  try {
    refill();
  } catch (...) {
    if (file_ != nullptr) std::fclose(file_);
    throw;
  }
  compressed_ = stream_.avail_in >= 2 && stream_.next_in[0] == 0x1f && stream_.next_in[1] == 0x8b;
  if (compressed_) {
    // 16 + 15: a gzip wrapper (header and CRC/length trailer checked by zlib), a 32 KiB window.
    if (inflateInit2(&stream_, 16 + MAX_WBITS) != Z_OK) {
      std::fclose(file_);
      throw Error(str(name_, ": cannot start gzip decompression (out of memory)"));
    }
    inflating_ = true;
  }
}

ByteStream::~ByteStream() {
  if (inflating_) inflateEnd(&stream_);
  if (file_ != nullptr) std::fclose(file_);
}

bool ByteStream::refill() {
  if (file_ == nullptr) {
    if (memory_left_ == 0) return false;
    const size_t step = std::min<size_t>(memory_left_, UINT_MAX);
    stream_.next_in = const_cast<uint8_t*>(memory_);
    stream_.avail_in = static_cast<unsigned>(step);
    memory_ += step;
    memory_left_ -= step;
    return true;
  }
  const size_t got = std::fread(input_.data(), 1, input_.size(), file_);
  if (got == 0 && std::ferror(file_)) {
    throw Error(str(name_, ": read error: ", std::strerror(errno)));
  }
  stream_.next_in = input_.data();
  stream_.avail_in = static_cast<unsigned>(got);
  return got > 0;
}

int64_t ByteStream::read(uint8_t* buffer, int64_t n) {
  const int64_t got = compressed_ ? read_gzip(buffer, n) : read_raw(buffer, n);
  produced_ += got;
  return got;
}

int64_t ByteStream::read_raw(uint8_t* buffer, int64_t n) {
  int64_t done = 0;
  while (done < n) {
    if (stream_.avail_in == 0 && !refill()) break;
    const unsigned step = static_cast<unsigned>(std::min<int64_t>(n - done, stream_.avail_in));
    std::memcpy(buffer + done, stream_.next_in, step);
    stream_.next_in += step;
    stream_.avail_in -= step;
    done += step;
  }
  return done;
}

int64_t ByteStream::read_gzip(uint8_t* buffer, int64_t n) {
  int64_t done = 0;
  while (done < n && (state_ == State::kMember || state_ == State::kBetweenMembers)) {
    if (stream_.avail_in == 0 && !refill()) {
      // The end of the input: clean between members, cut off inside one.
      state_ = state_ == State::kBetweenMembers ? State::kDone : State::kCutOff;
      break;
    }
    if (state_ == State::kBetweenMembers) {
      // More input: it must be another member (inflate rejects anything else as a bad header).
      inflateReset(&stream_);
      state_ = State::kMember;
    }
    const unsigned room = static_cast<unsigned>(std::min(n - done, kMaxStep));
    stream_.next_out = buffer + done;
    stream_.avail_out = room;
    const int code = inflate(&stream_, Z_NO_FLUSH);
    done += room - stream_.avail_out;
    if (code == Z_STREAM_END) {
      state_ = State::kBetweenMembers;
      ++members_;
    } else if (code != Z_OK && code != Z_BUF_ERROR) {
      // Z_BUF_ERROR only means "no progress without more input"; the loop refills.
      const char* why = stream_.msg != nullptr ? stream_.msg : zError(code);
      require(!(members_ > 0 && stream_.total_out == 0), name_, ": the data after the end of the ",
              "gzip stream (after ", produced_ + done, " decompressed bytes) is not gzip data (",
              why, "); the file is damaged");
      throw Error(str(name_, ": corrupt gzip data after ", produced_ + done,
                      " decompressed bytes (", why, "); the file is damaged"));
    }
  }
  return done;
}

int64_t ByteStream::skip_to_end() {
  std::vector<uint8_t> scratch(size_t{1} << 16);
  int64_t total = 0;
  for (;;) {
    const int64_t got = read(scratch.data(), static_cast<int64_t>(scratch.size()));
    total += got;
    if (got < static_cast<int64_t>(scratch.size())) return total;
  }
}

void ByteStream::check_complete() const {
  if (state_ != State::kCutOff) return;
  require(!(members_ > 0 && stream_.total_out == 0), name_, ": the data after the end of the ",
          "gzip stream (after ", produced_, " decompressed bytes) is not a complete gzip member; ",
          "the file is damaged");
  throw Error(str(name_, ": the gzip stream is cut off after ", produced_,
                  " decompressed bytes (no end marker and trailer); the file is truncated"));
}

}  // namespace purine
