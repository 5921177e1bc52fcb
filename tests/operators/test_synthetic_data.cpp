// synthetic_data (operators/synthetic_data.hpp): shapes, ranges, batches that are a function of
// the seed, rank and batch number only, the DataSource metadata and cursor, and bad attributes.
#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "operators/data_source.hpp"
#include "operators/registry.hpp"

using namespace purine;
using Catch::Contains;

namespace {

Attrs synthetic(int64_t rank = 0, int64_t seed = 1) {
  return Attrs()
      .set("channels", int64_t{3})
      .set("rows", int64_t{5})
      .set("cols", int64_t{4})
      .set("classes", int64_t{7})
      .set("batch", int64_t{6})
      .set("samples", int64_t{600})
      .set("rank", rank)
      .set("ranks", int64_t{2})
      .set("seed", seed);
}

// The next `n` batches (images then labels, flattened).
std::vector<std::vector<float>> batches(Operator& op, int n) {
  std::vector<std::vector<float>> out;
  for (int i = 0; i < n; ++i) {
    Tensor images({6, 3, 5, 4}), labels({6});
    std::vector<Tensor*> outputs{&images, &labels};
    OpContext context;
    op.compute({}, outputs, context);
    std::vector<float> both = images.values();
    const std::vector<float> l = labels.values();
    both.insert(both.end(), l.begin(), l.end());
    out.push_back(both);
  }
  return out;
}

}  // namespace

TEST_CASE("synthetic_data serves seeded batches of the declared shapes", "[synthetic]") {
  auto op = OperatorRegistry::create("synthetic_data", synthetic());
  CHECK(op->infer_shapes({}) == std::vector<Shape>{Shape{6, 3, 5, 4}, Shape{6}});
  DataSource& source = *op->data_source();
  CHECK(source.classes() == 7);
  CHECK(source.rows() == 5);
  CHECK(source.cols() == 4);
  CHECK(source.batches_per_epoch() == 50);  // 600 samples / (6 x 2 ranks)
  const auto first = batches(*op, 3);
  CHECK(source.batches_served() == 3);
  for (const auto& b : first) {
    for (size_t i = 0; i < 360; ++i) REQUIRE((b[i] >= -1.0f && b[i] < 1.0f));
    for (size_t i = 360; i < 366; ++i) REQUIRE((b[i] >= 0 && b[i] < 7 && b[i] == int(b[i])));
  }
  CHECK(first[0] != first[1]);
  // The same seed and rank give the same batches; another rank or seed others.
  CHECK(batches(*OperatorRegistry::create("synthetic_data", synthetic()), 3) == first);
  CHECK(batches(*OperatorRegistry::create("synthetic_data", synthetic(1)), 1)[0] != first[0]);
  CHECK(batches(*OperatorRegistry::create("synthetic_data", synthetic(0, 2)), 1)[0] != first[0]);
  // A resumed source serves the batch it would have served.
  auto resumed = OperatorRegistry::create("synthetic_data", synthetic());
  resumed->data_source()->skip_to(2);
  CHECK(batches(*resumed, 1)[0] == first[2]);
}

TEST_CASE("synthetic_data refuses bad attributes, naming them", "[synthetic]") {
  REQUIRE_THROWS_WITH(OperatorRegistry::create("synthetic_data", synthetic().set("rows", int64_t{0})),
                      Contains("'rows' is 0"));
  REQUIRE_THROWS_WITH(OperatorRegistry::create("synthetic_data", Attrs()),
                      Contains("missing attribute 'channels'"));
  REQUIRE_THROWS_WITH(
      OperatorRegistry::create("synthetic_data", synthetic().set("samples", int64_t{5})),
      Contains("5 samples per epoch hold no global batch of 12"));
}
