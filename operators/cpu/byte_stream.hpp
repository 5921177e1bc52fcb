// ByteStream: the bytes of one file, or of a memory buffer holding a file, decompressed on the fly
// when they begin with the gzip magic (1f 8b); concatenated gzip members read as one stream, as
// `gzip -d` reads them. Reading holds a fixed buffer, never more, whatever the data claims.
// Every problem throws purine::Error naming the stream (a file path): a file that cannot be opened
// or read, corrupt gzip data (including a member whose trailer's CRC or length disagrees with its
// data) and bytes after the last member that are no gzip member. A gzip stream cut off before its
// end reads as short data; check_complete() says so.
// Not thread-safe: one reader per stream.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace purine {

class ByteStream {
 public:
  // Throws purine::Error when the file cannot be opened.
  static std::unique_ptr<ByteStream> open_file(const std::string& path);
  // Reads `size` bytes at `data`, which must outlive the stream; `name` stands for a path.
  static std::unique_ptr<ByteStream> from_memory(std::string name, const uint8_t* data,
                                                 size_t size);
  ~ByteStream();
  ByteStream(const ByteStream&) = delete;
  ByteStream& operator=(const ByteStream&) = delete;

  const std::string& name() const { return name_; }
  bool compressed() const { return compressed_; }

  // Reads up to n bytes into `buffer`; fewer only at the end of the data.
  int64_t read(uint8_t* buffer, int64_t n);
  // Reads and discards the rest of the data; returns how many bytes there were.
  int64_t skip_to_end();
  // After the data has been read to its end: throws if a gzip stream stopped short of its end
  // marker and trailer (a file cut off).
  void check_complete() const;

 private:
  enum class State { kMember, kBetweenMembers, kDone, kCutOff };

  ByteStream(std::string name, std::FILE* file, const uint8_t* data, size_t size);
  // Makes more raw input available in stream_.next_in / avail_in; false at the end of it.
  bool refill();
  int64_t read_raw(uint8_t* buffer, int64_t n);
  int64_t read_gzip(uint8_t* buffer, int64_t n);

  const std::string name_;
  std::FILE* file_ = nullptr;        // owned; null for a memory stream
  const uint8_t* memory_ = nullptr;  // a memory stream's data
  size_t memory_left_ = 0;           // of it, not yet handed to the reader
  std::vector<uint8_t> input_;       // a file stream's raw input buffer
  z_stream stream_{};                // next_in/avail_in: raw input not yet consumed
  bool compressed_ = false;
  bool inflating_ = false;  // stream_ holds an inflate state
  State state_ = State::kMember;
  int64_t produced_ = 0;  // bytes read so far
  int members_ = 0;       // gzip members read to their end
};

}  // namespace purine
