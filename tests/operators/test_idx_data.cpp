#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "idx_test_files.hpp"
#include "operators/idx_data.hpp"
#include "operators/registry.hpp"

namespace purine {
namespace {

using namespace purine::testing;

std::unique_ptr<IdxDataOp> make_op(const Attrs& attrs) {
  std::unique_ptr<Operator> op = OperatorRegistry::create("idx_data", attrs);
  REQUIRE(dynamic_cast<IdxDataOp*>(op.get()) != nullptr);
  return std::unique_ptr<IdxDataOp>(static_cast<IdxDataOp*>(op.release()));
}

struct Batch {
  Tensor images;
  Tensor labels;
  // The sample index of each row (the first pixel, unscaled).
  std::vector<int> samples() const {
    std::vector<int> out;
    const int64_t n = labels.count();
    for (int64_t t = 0; t < n; ++t)
      out.push_back(static_cast<int>(images.data()[t * 4] * 255.0f + 0.5f));
    return out;
  }
};

Batch next_batch(IdxDataOp& op) {
  std::vector<Shape> shapes = op.output_shapes({});
  Batch b{Tensor(shapes[0]), Tensor(shapes[1])};
  OpContext context;
  op.compute({}, {&b.images, &b.labels}, context);
  return b;
}

std::vector<std::vector<int>> batches(const Attrs& attrs, int n) {
  auto op = make_op(attrs);
  std::vector<std::vector<int>> out;
  for (int i = 0; i < n; ++i) out.push_back(next_batch(*op).samples());
  return out;
}

Attrs base_attrs(const TempDir& dir, int64_t batch) {
  return Attrs().set("dir", dir.path()).set("split", "train").set("batch", batch);
}

}  // namespace

TEST_CASE("idx_data: shapes, sizes and scaled values", "[idx_data]") {
  for (bool gz : {true, false}) {
    TempDir dir;
    write_dataset(dir, 10, gz);
    auto op = make_op(base_attrs(dir, 4).set("shuffle", 0));
    CHECK(op->num_inputs() == 0);
    CHECK(op->num_outputs() == 2);
    std::vector<Shape> shapes = op->output_shapes({});
    CHECK(shapes[0] == Shape{4, 1, 2, 2});
    CHECK(shapes[1] == Shape{4});
    CHECK(op->samples() == 10);
    CHECK(op->classes() == 3);
    CHECK(op->batches_per_epoch() == 2);
    CHECK(op->epoch() == -1);
    CHECK_FALSE(op->differentiable());
    CHECK_FALSE(op->uses_rng());

    Batch b = next_batch(*op);
    for (int t = 0; t < 4; ++t) {
      CHECK(b.images.data()[t * 4 + 0] == Approx(t / 255.0f));
      CHECK(b.images.data()[t * 4 + 1] == Approx((255 - t) / 255.0f));
      CHECK(b.images.data()[t * 4 + 2] == 0.0f);
      CHECK(b.images.data()[t * 4 + 3] == Approx(1.0f));
      CHECK(b.labels.data()[t] == static_cast<float>(t % 3));
    }
    CHECK(op->epoch() == 0);
    CHECK(op->last_batch_valid() == 4);
    CHECK(next_batch(*op).samples() == std::vector<int>{4, 5, 6, 7});
    CHECK(next_batch(*op).samples() == std::vector<int>{0, 1, 2, 3});  // 8 and 9 dropped
    CHECK(op->epoch() == 1);
    CHECK(op->batches_served() == 3);
  }
}

TEST_CASE("idx_data: scale and mean", "[idx_data]") {
  TempDir dir;
  write_dataset(dir, 4);
  auto op = make_op(base_attrs(dir, 2).set("shuffle", 0).set("scale", 0.5).set("mean", 10.0));
  Batch b = next_batch(*op);
  const std::vector<float> expected = {-10.0f, 117.5f, -10.0f, 117.5f,
                                       -9.5f,  117.0f, -10.0f, 117.5f};
  for (int i = 0; i < 8; ++i) CHECK(b.images.data()[i] == Approx(expected[i]));
  CHECK(b.labels.data()[0] == 0.0f);
  CHECK(b.labels.data()[1] == 1.0f);
}

TEST_CASE("idx_data: every sample once per epoch, a new order each epoch", "[idx_data]") {
  TempDir dir;
  write_dataset(dir, 24);
  auto op = make_op(base_attrs(dir, 4).set("seed", 5));  // train: shuffled by default
  REQUIRE(op->batches_per_epoch() == 6);
  std::vector<std::vector<int>> orders;
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::vector<int> order;
    for (int k = 0; k < 6; ++k) {
      Batch b = next_batch(*op);
      CHECK(op->epoch() == epoch);
      std::vector<int> samples = b.samples();
      for (int t = 0; t < 4; ++t) CHECK(b.labels.data()[t] == static_cast<float>(samples[t] % 3));
      order.insert(order.end(), samples.begin(), samples.end());
    }
    std::vector<int> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int> all(24);
    for (int i = 0; i < 24; ++i) all[i] = i;
    CHECK(sorted == all);
    orders.push_back(order);
  }
  std::vector<int> identity(24);
  for (int i = 0; i < 24; ++i) identity[i] = i;
  CHECK(orders[0] != identity);
  CHECK(orders[0] != orders[1]);
  CHECK(orders[1] != orders[2]);
}

TEST_CASE("idx_data: the same seed gives the same batches, another seed others", "[idx_data]") {
  TempDir dir;
  write_dataset(dir, 40);
  const auto first = batches(base_attrs(dir, 8).set("seed", 11), 12);
  CHECK(batches(base_attrs(dir, 8).set("seed", 11), 12) == first);
  CHECK(batches(base_attrs(dir, 8).set("seed", 12), 12) != first);
}

TEST_CASE("idx_data: mirror flips about half the samples, afresh every epoch, from the seed",
          "[idx_data]") {
  // Sample i is [[i, 255 - i], [0, 255]]; mirrored it is [[255 - i, i], [255, 0]].
  TempDir dir;
  write_dataset(dir, 40);
  const Attrs attrs = base_attrs(dir, 8).set("shuffle", 0).set("seed", 7).set("mirror", 1);
  // For each epoch and sample: whether it came mirrored.
  auto mirrored = [&](const Attrs& a) {
    auto op = make_op(a);
    std::vector<std::vector<bool>> flips(3, std::vector<bool>(40));
    for (int epoch = 0; epoch < 3; ++epoch) {
      for (int k = 0; k < 5; ++k) {
        Batch b = next_batch(*op);
        for (int t = 0; t < 8; ++t) {
          const int i = k * 8 + t;
          const float* px = b.images.data() + t * 4;
          const bool flipped = px[2] == Approx(1.0f);
          if (flipped) {
            CHECK(px[0] == Approx((255 - i) / 255.0f));
            CHECK(px[1] == Approx(i / 255.0f));
            CHECK(px[3] == 0.0f);
          } else {
            CHECK(px[0] == Approx(i / 255.0f));
            CHECK(px[1] == Approx((255 - i) / 255.0f));
            CHECK(px[2] == 0.0f);
          }
          CHECK(b.labels.data()[t] == static_cast<float>(i % 3));  // labels never move
          flips[epoch][i] = flipped;
        }
      }
    }
    return flips;
  };
  const auto flips = mirrored(attrs);
  int count = 0;
  for (const auto& epoch : flips)
    count += static_cast<int>(std::count(epoch.begin(), epoch.end(), true));
  CHECK(count > 120 * 3 / 10);
  CHECK(count < 120 * 7 / 10);
  CHECK(flips[0] != flips[1]);
  CHECK(flips[1] != flips[2]);
  CHECK(mirrored(attrs) == flips);
  CHECK(mirrored(Attrs(attrs).set("seed", 8)) != flips);
  // Without the attribute nothing is mirrored.
  auto plain = make_op(base_attrs(dir, 8).set("shuffle", 0));
  CHECK(next_batch(*plain).images.data()[2] == 0.0f);
}

TEST_CASE("idx_data: ranks serve disjoint slices of the global batch", "[idx_data]") {
  TempDir dir;
  write_dataset(dir, 30);
  for (int shuffle : {0, 1}) {
    Attrs common = base_attrs(dir, 2).set("seed", 3).set("shuffle", shuffle);
    const auto global = batches(Attrs(common).set("batch", 4), 20);  // 7 per epoch: ~3 epochs
    const auto rank0 = batches(Attrs(common).set("ranks", 2).set("rank", 0), 20);
    const auto rank1 = batches(Attrs(common).set("ranks", 2).set("rank", 1), 20);
    for (int k = 0; k < 20; ++k) {
      CHECK(rank0[k] == std::vector<int>(global[k].begin(), global[k].begin() + 2));
      CHECK(rank1[k] == std::vector<int>(global[k].begin() + 2, global[k].end()));
    }
    auto op = make_op(Attrs(common).set("ranks", 2).set("rank", 1));
    CHECK(op->batches_per_epoch() == 7);
  }
}

TEST_CASE("idx_data: drop_last=0 wraps the last batch into the next epoch's order", "[idx_data]") {
  TempDir dir;
  write_dataset(dir, 10);
  auto op = make_op(base_attrs(dir, 4).set("shuffle", 0).set("drop_last", 0));
  REQUIRE(op->batches_per_epoch() == 3);
  const std::vector<std::vector<int>> expected = {
      {0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 0, 1}, {0, 1, 2, 3}};
  const std::vector<int64_t> valid = {4, 4, 2, 4};
  const std::vector<int64_t> epochs = {0, 0, 0, 1};
  for (int k = 0; k < 4; ++k) {
    CHECK(next_batch(*op).samples() == expected[k]);
    CHECK(op->last_batch_valid() == valid[k]);
    CHECK(op->epoch() == epochs[k]);
  }

  // Two ranks of 2: the third global batch is {8, 9 | 0, 1}, all padding on rank 1.
  auto rank1 = make_op(
      base_attrs(dir, 2).set("shuffle", 0).set("drop_last", 0).set("ranks", 2).set("rank", 1));
  CHECK(rank1->batches_per_epoch() == 3);
  for (int k = 0; k < 3; ++k) next_batch(*rank1);
  CHECK(rank1->last_batch_valid() == 0);

  // A set smaller than one batch wraps through several epochs' orders.
  TempDir tiny;
  write_dataset(tiny, 3);
  auto small = make_op(base_attrs(tiny, 8).set("shuffle", 0).set("drop_last", 0));
  CHECK(small->batches_per_epoch() == 1);
  CHECK(next_batch(*small).samples() == std::vector<int>{0, 1, 2, 0, 1, 2, 0, 1});
  CHECK(small->last_batch_valid() == 3);

  // Shuffled: each epoch's first batches still cover every sample once.
  auto shuffled = make_op(base_attrs(dir, 4).set("drop_last", 0).set("seed", 9));
  std::vector<int> seen;
  for (int k = 0; k < 3; ++k) {
    std::vector<int> s = next_batch(*shuffled).samples();
    seen.insert(seen.end(), s.begin(), s.begin() + shuffled->last_batch_valid());
  }
  std::sort(seen.begin(), seen.end());
  CHECK(seen == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
}

TEST_CASE("idx_data: file errors throw at construction and name the path", "[idx_data]") {
  TempDir dir;
  REQUIRE_THROWS_WITH(make_op(base_attrs(dir, 4)),
                      Catch::Contains("no such file: " + dir.file("train-images-idx3-ubyte.gz")));
  REQUIRE_THROWS_WITH(idx_sample_count(dir.path(), "test"),
                      Catch::Contains("no such file: " + dir.file("t10k-images-idx3-ubyte.gz")));

  write_dataset(dir, 10);
  std::vector<uint8_t> bytes = image_bytes(10);
  bytes.resize(bytes.size() - 3);
  write_gz(dir.file("train-images-idx3-ubyte.gz"), bytes);
  REQUIRE_THROWS_WITH(make_op(base_attrs(dir, 4)),
                      Catch::Contains(dir.file("train-images-idx3-ubyte.gz")) &&
                          Catch::Contains("truncated image data"));

  write_gz(dir.file("train-images-idx3-ubyte.gz"), label_bytes(10));
  REQUIRE_THROWS_WITH(make_op(base_attrs(dir, 4)),
                      Catch::Contains(dir.file("train-images-idx3-ubyte.gz")) &&
                          Catch::Contains("not an IDX image file"));

  write_gz(dir.file("train-images-idx3-ubyte.gz"), image_bytes(9));
  REQUIRE_THROWS_WITH(make_op(base_attrs(dir, 4)),
                      Catch::Contains(dir.file("train-images-idx3-ubyte.gz") + " has 9 images") &&
                          Catch::Contains("has 10 labels"));
}

TEST_CASE("idx_data: bad attributes are errors", "[idx_data]") {
  TempDir dir;
  write_dataset(dir, 10);
  REQUIRE_THROWS_WITH(make_op(Attrs().set("dir", dir.path())),
                      Catch::Contains("attribute 'batch'"));
  REQUIRE_THROWS_WITH(make_op(base_attrs(dir, 0)), Catch::Contains("'batch' is 0"));
  REQUIRE_THROWS_WITH(make_op(base_attrs(dir, 2).set("ranks", 2).set("rank", 2)),
                      Catch::Contains("'rank' is 2; expected 0 <= rank < ranks = 2"));
  REQUIRE_THROWS_WITH(make_op(base_attrs(dir, 2).set("shuffle", 2)),
                      Catch::Contains("'shuffle' is 2; expected 0 or 1"));
  REQUIRE_THROWS_WITH(make_op(base_attrs(dir, 2).set("mirror", -1)),
                      Catch::Contains("'mirror' is -1; expected 0 or 1"));
  REQUIRE_THROWS_WITH(make_op(base_attrs(dir, 2).set("split", "val")),
                      Catch::Contains("split 'val'"));
  REQUIRE_THROWS_WITH(make_op(base_attrs(dir, 6).set("ranks", 2)),
                      Catch::Contains("has 10 samples, fewer than one global batch of 12"));
  CHECK(make_op(base_attrs(dir, 6).set("ranks", 2).set("drop_last", 0))->batches_per_epoch() == 1);
}

TEST_CASE("idx_data: the classes attribute, not the labels of one split, sets classes()",
          "[idx_data]") {
  TempDir dir;
  write_dataset(dir, 10, true, "t10k");  // labels 0..2 only
  auto from_labels = make_op(base_attrs(dir, 4).set("split", "test"));
  CHECK(from_labels->classes() == 3);
  auto op = make_op(base_attrs(dir, 4).set("split", "test").set("classes", 10));
  CHECK(op->classes() == 10);
  Batch b = next_batch(*op);
  CHECK(b.labels.data()[2] == 2.0f);
  CHECK(op->classes() == 10);
}

TEST_CASE("idx_data: a label beyond 'classes' names the file, the record and the label",
          "[idx_data]") {
  TempDir dir;
  write_dataset(dir, 10);
  REQUIRE_THROWS_WITH(make_op(base_attrs(dir, 4).set("classes", 2)),
                      Catch::StartsWith(dir.file("train-labels-idx1-ubyte.gz") +
                                        ": label of record 2 is 2, expected below 2 classes"));
  REQUIRE_THROWS_WITH(make_op(base_attrs(dir, 4).set("classes", -1)),
                      Catch::Contains("attribute 'classes' is -1"));
  CHECK(make_op(base_attrs(dir, 4).set("classes", 0))->classes() == 3);

  // Labels changed after the graph was built: the background load checks them again.
  auto op = make_op(base_attrs(dir, 4).set("classes", 3));
  std::vector<uint8_t> labels = label_bytes(10);
  labels[8 + 7] = 9;
  write_gz(dir.file("train-labels-idx1-ubyte.gz"), labels);
  REQUIRE_THROWS_WITH(next_batch(*op), Catch::Contains("label of record 7 is 9"));
}

TEST_CASE("idx_data: an error in the prefetch thread is rethrown from compute", "[idx_data]") {
  TempDir dir;
  write_dataset(dir, 10);
  auto op = make_op(base_attrs(dir, 4));
  // The files change after the graph was built: the lazy load fails in the background thread.
  std::vector<uint8_t> bytes = image_bytes(10);
  bytes.resize(bytes.size() - 3);
  write_gz(dir.file("train-images-idx3-ubyte.gz"), bytes);
  REQUIRE_THROWS_WITH(next_batch(*op), Catch::Contains(dir.file("train-images-idx3-ubyte.gz")) &&
                                           Catch::Contains("truncated image data"));
  REQUIRE_THROWS_WITH(next_batch(*op), Catch::Contains("truncated image data"));
}

TEST_CASE("idx_data: destruction never hangs", "[idx_data]") {
  TempDir dir;
  write_dataset(dir, 100);
  { auto never_run = make_op(base_attrs(dir, 4)); }
  for (int served = 1; served < 5; ++served) {
    auto op = make_op(base_attrs(dir, 4));
    for (int k = 0; k < served; ++k) next_batch(*op);
  }
  SUCCEED();
}

TEST_CASE("idx_data: shape errors and strided outputs", "[idx_data]") {
  TempDir dir;
  write_dataset(dir, 10);
  auto op = make_op(base_attrs(dir, 4));
  Tensor images(Shape{4, 1, 2, 3});
  Tensor labels(Shape{4});
  OpContext context;
  REQUIRE_THROWS_WITH(op->compute({}, {&images, &labels}, context),
                      Catch::Contains("expected [4,1,2,2]"));
  Tensor input(Shape{1});
  Tensor good(Shape{4, 1, 2, 2});
  REQUIRE_THROWS_WITH(op->compute({&input}, {&good, &labels}, context),
                      Catch::Contains("expected 0 inputs, got 1"));
}

TEST_CASE("idx_data: serves the installed Fashion-MNIST training set", "[idx_data]") {
  struct stat info;
  if (::stat(kDefaultIdxDir, &info) != 0) {
    WARN("skipped: " << kDefaultIdxDir
                     << " is not installed (Debian package dataset-fashion-mnist)");
    return;
  }
  CHECK(idx_sample_count(kDefaultIdxDir, "test") == 10000);
  auto op = make_op(Attrs().set("batch", 64).set("seed", 1));
  CHECK(op->samples() == 60000);
  CHECK(op->classes() == 10);
  CHECK(op->batches_per_epoch() == 937);
  CHECK(op->output_shapes({})[0] == Shape{64, 1, 28, 28});
  std::vector<Shape> shapes = op->output_shapes({});
  Tensor images(shapes[0]);
  Tensor labels(shapes[1]);
  OpContext context;
  op->compute({}, {&images, &labels}, context);
  float low = 1.0f, high = 0.0f;
  for (int64_t i = 0; i < images.count(); ++i) {
    low = std::min(low, images.data()[i]);
    high = std::max(high, images.data()[i]);
  }
  CHECK(low >= 0.0f);
  CHECK(high <= 1.0f);
  CHECK(high > 0.5f);
  for (int64_t t = 0; t < 64; ++t) {
    CHECK(labels.data()[t] >= 0.0f);
    CHECK(labels.data()[t] <= 9.0f);
  }
}

}  // namespace purine
