#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "operators/cpu/byte_stream.hpp"
#include "temp_dir.hpp"

namespace purine {
namespace {

using testing::TempDir;

// Poorly compressible bytes, so that the compressed file spans several input buffers.
std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> out(n);
  uint32_t x = 12345;
  for (auto& b : out) b = static_cast<uint8_t>((x = x * 1103515245u + 12345u) >> 23);
  return out;
}

std::vector<uint8_t> gzip(const std::vector<uint8_t>& data) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::vector<uint8_t> out(deflateBound(&z, data.size()));
  z.next_in = const_cast<uint8_t*>(data.data());
  z.avail_in = static_cast<unsigned>(data.size());
  z.next_out = out.data();
  z.avail_out = static_cast<unsigned>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  // fwrite's buffer must not be null, not even for 0 bytes (an empty vector's data() may be).
  if (!bytes.empty()) REQUIRE(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
  std::fclose(f);
}

// Everything the stream holds, read in pieces of `step` bytes.
std::vector<uint8_t> read_all(ByteStream& in, int64_t step) {
  std::vector<uint8_t> out;
  for (;;) {
    const size_t at = out.size();
    out.resize(at + step);
    const int64_t got = in.read(out.data() + at, step);
    out.resize(at + got);
    if (got < step) break;
  }
  in.check_complete();
  return out;
}

}  // namespace

TEST_CASE("byte_stream: files and memory read the same, raw or gzip", "[byte_stream]") {
  TempDir dir;
  const std::vector<uint8_t> data = pattern(700000);
  std::vector<uint8_t> two_members = gzip({data.begin(), data.begin() + 300000});
  const std::vector<uint8_t> second = gzip({data.begin() + 300000, data.end()});
  two_members.insert(two_members.end(), second.begin(), second.end());
  for (const auto& bytes : {data, gzip(data), two_members}) {
    write_file(dir.file("f"), bytes);
    auto file = ByteStream::open_file(dir.file("f"));
    auto memory = ByteStream::from_memory("m", bytes.data(), bytes.size());
    CHECK(file->compressed() == (bytes.size() != data.size()));
    CHECK(read_all(*file, 7777) == data);
    CHECK(read_all(*memory, 1 << 20) == data);
    CHECK(file->read(nullptr, 0) == 0);
  }
}

TEST_CASE("byte_stream: empty and missing files", "[byte_stream]") {
  TempDir dir;
  write_file(dir.file("empty"), {});
  auto empty = ByteStream::open_file(dir.file("empty"));
  CHECK_FALSE(empty->compressed());
  CHECK(empty->skip_to_end() == 0);
  REQUIRE_THROWS_WITH(ByteStream::open_file(dir.file("none")),
                      Catch::Equals(dir.file("none") + ": cannot open: No such file or directory"));
}

TEST_CASE("byte_stream: corrupt and cut-off gzip data name the stream", "[byte_stream]") {
  std::vector<uint8_t> bytes = gzip(pattern(1000));
  std::vector<uint8_t> corrupt = bytes;
  corrupt[corrupt.size() - 6] ^= 1;  // the CRC
  auto bad = ByteStream::from_memory("bad.gz", corrupt.data(), corrupt.size());
  REQUIRE_THROWS_WITH(bad->skip_to_end(),
                      Catch::Equals("bad.gz: corrupt gzip data after 1000 decompressed bytes "
                                    "(incorrect data check); the file is damaged"));
  auto cut = ByteStream::from_memory("cut.gz", bytes.data(), bytes.size() / 2);
  CHECK(cut->skip_to_end() < 1000);
  REQUIRE_THROWS_WITH(cut->check_complete(), Catch::StartsWith("cut.gz: the gzip stream is cut"));
}

}  // namespace purine
