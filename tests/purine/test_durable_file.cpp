// Crash-safe writes, output checks and bounded reads (purine/durable_file.hpp).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "purine/durable_file.hpp"
#include "temp_dir.hpp"

using namespace purine;
using Catch::Contains;

namespace {
std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
size_t files_in(const std::string& dir) {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) n += entry.exists();
  return n;
}
}  // namespace

TEST_CASE("durable writes replace the file whole and leave nothing behind", "[durable_file]") {
  testing::TempDir dir;
  const std::string path = dir.file("out");
  write_file_durably(path, "first");
  write_file_durably(path, "second, longer");
  CHECK(read_all(path) == "second, longer");
  CHECK(files_in(dir.path()) == 1);  // no temporary left
  CHECK(is_durable_temporary("ckpt-0000000005.purine.tmp-1234"));
  CHECK_FALSE(is_durable_temporary("ckpt-0000000005.purine"));
  // Failures name the file and the reason, and leave the old content and no temporary.
  REQUIRE_THROWS_WITH(write_file_durably(path + "/below", "x"),
                      Contains(path + "/below") && Contains("Not a directory"));
  REQUIRE_THROWS_WITH(write_file_durably(dir.path(), "x"), Contains("is a directory"));
  REQUIRE_THROWS_WITH(write_file_durably("/dev/full", "x"),
                      Contains("/dev/full") && Contains("No space left"));
  CHECK(read_all(path) == "second, longer");
  CHECK(files_in(dir.path()) == 1);
}

TEST_CASE("outputs are checked without changing them", "[durable_file]") {
  testing::TempDir dir;
  const std::string existing = dir.file("summary.json");
  write_file_durably(existing, "keep me");
  check_writable(existing, "the summary file");
  CHECK(read_all(existing) == "keep me");
  check_writable(dir.file("new.json"), "the summary file");
  CHECK_FALSE(std::filesystem::exists(dir.file("new.json")));  // created and removed again
  REQUIRE_THROWS_WITH(check_writable(existing + "/x", "the trace file"),
                      Contains("cannot write the trace file '" + existing + "/x'"));
  REQUIRE_THROWS_WITH(check_writable(dir.path(), "the summary file"), Contains("is a directory"));
}

TEST_CASE("bounded reads stop at the limit", "[durable_file]") {
  testing::TempDir dir;
  const std::string path = dir.file("f");
  write_file_durably(path, std::string(100, 'a'));
  CHECK(read_file_bounded(path, 100, "file").size() == 100);
  REQUIRE_THROWS_WITH(read_file_bounded(path, 99, "file"),
                      Contains("'" + path + "' has 100 bytes, more than the 99"));
  REQUIRE_THROWS_WITH(read_file_bounded("/dev/zero", 1000, "checkpoint"),
                      Contains("'/dev/zero' holds more than the 1000 bytes"));
  REQUIRE_THROWS_WITH(read_file_bounded(dir.file("none"), 10, "checkpoint"),
                      Contains("cannot read checkpoint") && Contains("No such file"));
}
