// The process-wide IDX caches read a split once for every op that uses it, and read it again once
// its files change, even when a rewrite keeps the size and lands within one timestamp tick.

#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "idx_test_files.hpp"
#include "operators/cpu/idx_cache.hpp"
#include "operators/idx_data.hpp"

namespace purine {
namespace {

using namespace purine::testing;

TEST_CASE("idx cache: the metadata of a split is read once for all its users", "[idx_data]") {
  TempDir dir;
  write_dataset(dir, 12);
  const int64_t before = idx_cache_reads();
  CHECK(cached_idx_metadata(dir.path(), "train").count == 12);
  CHECK(idx_cache_reads() == before + 1);
  CHECK(idx_sample_count(dir.path(), "train") == 12);
  const IdxDataset meta = cached_idx_metadata(dir.path(), "train");
  CHECK(idx_cache_reads() == before + 1);
  CHECK(meta.classes == 3);
  CHECK(meta.rows == 2);
  CHECK(meta.images.empty());
  CHECK(meta.labels.size() == 12);
}

TEST_CASE("idx cache: a file rewritten with the same size is read again", "[idx_data]") {
  for (bool gz : {true, false}) {
    INFO((gz ? "gzip" : "uncompressed"));
    TempDir dir;
    write_dataset(dir, 12, gz);
    CHECK(cached_idx_metadata(dir.path(), "train").classes == 3);
    // One label changed in place: same size, and quite possibly the same modification time.
    std::vector<uint8_t> labels = label_bytes(12);
    labels[8 + 5] = 6;
    const std::string name = gz ? "train-labels-idx1-ubyte.gz" : "train-labels-idx1-ubyte";
    if (gz)
      write_gz(dir.file(name), labels);
    else
      write_plain(dir.file(name), labels);
    const int64_t before = idx_cache_reads();
    CHECK(cached_idx_metadata(dir.path(), "train").classes == 7);
    CHECK(idx_cache_reads() == before + 1);
  }
}

TEST_CASE("idx cache: a load that failed is not remembered", "[idx_data]") {
  TempDir dir;
  write_dataset(dir, 12);
  std::vector<uint8_t> images = image_bytes(12);
  images.resize(images.size() - 1);
  write_gz(dir.file("train-images-idx3-ubyte.gz"), images);
  REQUIRE_THROWS_WITH(cached_idx_metadata(dir.path(), "train"),
                      Catch::Contains("truncated image data"));
  REQUIRE_THROWS_WITH(shared_idx_dataset(dir.path(), "train"),
                      Catch::Contains("truncated image data"));
  write_dataset(dir, 12);
  CHECK(cached_idx_metadata(dir.path(), "train").count == 12);
  CHECK(shared_idx_dataset(dir.path(), "train")->images.size() == 12 * 4);
}

TEST_CASE("idx cache: the whole split is shared while in use, then let go", "[idx_data]") {
  TempDir dir;
  write_dataset(dir, 12);
  const int64_t before = idx_cache_reads();
  std::shared_ptr<const IdxDataset> first = shared_idx_dataset(dir.path(), "train");
  std::shared_ptr<const IdxDataset> second = shared_idx_dataset(dir.path(), "train");
  CHECK(first.get() == second.get());
  CHECK(idx_cache_reads() == before + 1);
  CHECK(first->images[4] == 1);  // sample 1's first pixel
  first.reset();
  second.reset();
  CHECK(shared_idx_dataset(dir.path(), "train")->count == 12);
  CHECK(idx_cache_reads() == before + 2);
}

TEST_CASE("idx cache: the split read for its metadata serves the next whole-split user",
          "[idx_data]") {
  TempDir dir;
  write_dataset(dir, 12);
  const int64_t before = idx_cache_reads();
  CHECK(cached_idx_metadata(dir.path(), "train").images.empty());
  std::shared_ptr<const IdxDataset> whole = shared_idx_dataset(dir.path(), "train");
  CHECK(idx_cache_reads() == before + 1);  // one decompression for both
  CHECK(whole->images.size() == 12 * 4);
  CHECK(whole->images[4] == 1);  // sample 1's first pixel
  whole.reset();                 // handed over once: let go like any other load
  CHECK(shared_idx_dataset(dir.path(), "train")->count == 12);
  CHECK(idx_cache_reads() == before + 2);
  // The metadata of a split already in use comes from it, without a read.
  TempDir other;
  write_dataset(other, 12);
  const int64_t held_before = idx_cache_reads();
  std::shared_ptr<const IdxDataset> held = shared_idx_dataset(other.path(), "train");
  CHECK(cached_idx_metadata(other.path(), "train").labels.size() == 12);
  CHECK(idx_cache_reads() == held_before + 1);
}

}  // namespace
}  // namespace purine
