// Shape arithmetic and Tensor views: what the zero-copy split/concat/reshape and the parameter
// swap between runs rely on.
#include <catch2/catch.hpp>

#include "base/shape.hpp"
#include "base/tensor.hpp"

using purine::Location;
using purine::Shape;
using purine::Tensor;

namespace {

// A {rows, cols} tensor holding 0, 1, 2, ... in row-major order.
Tensor iota(int64_t rows, int64_t cols) {
  Tensor t(Shape({rows, cols}));
  for (int64_t i = 0; i < t.count(); ++i) t.mutable_data()[i] = static_cast<float>(i);
  return t;
}

}  // namespace

TEST_CASE("shape counts and contiguous strides", "[tensor]") {
  Shape s({2, 3, 4});
  CHECK(s.ndim() == 3);
  CHECK(s.count() == 24);
  CHECK(s.count_from(1) == 12);
  CHECK(s.count_to(2) == 6);
  CHECK(s.contiguous_strides() == std::vector<int64_t>{12, 4, 1});
  CHECK(Shape({}).count() == 1);
  CHECK(Shape({3, 0}).count() == 0);
  CHECK(s == Shape({2, 3, 4}));
  CHECK(s != Shape({4, 3, 2}));
}

TEST_CASE("a new tensor is zero-filled, contiguous and spans its storage", "[tensor]") {
  Tensor t(Shape({3, 5}));
  CHECK(t.is_contiguous());
  CHECK(t.covers_storage());
  for (int64_t i = 0; i < t.count(); ++i) REQUIRE(t.data()[i] == 0.0f);
}

TEST_CASE("views and reshapes share memory with their tensor", "[tensor]") {
  Tensor t = iota(4, 3);
  Tensor row2 = t.view(6, Shape({3}));
  CHECK(row2.shares_storage(t));
  CHECK(row2.data()[0] == 6.0f);
  CHECK_FALSE(row2.covers_storage());
  row2.mutable_data()[1] = -1.0f;
  CHECK(t.data()[7] == -1.0f);

  Tensor flat = t.reshaped(Shape({12}));
  CHECK(flat.covers_storage());
  CHECK(flat.data()[7] == -1.0f);
}

TEST_CASE("a strided slice copies into a contiguous tensor element by element", "[tensor]") {
  Tensor t = iota(3, 4);
  Tensor columns = t.slice(1, 1, 3);  // columns 1 and 2 of every row
  CHECK_FALSE(columns.is_contiguous());
  Tensor packed(Shape({3, 2}));
  packed.copy_from(columns);
  const float expected[] = {1, 2, 5, 6, 9, 10};
  for (int i = 0; i < 6; ++i) CHECK(packed.data()[i] == expected[i]);
}

TEST_CASE("swap_memory exchanges values and views follow the tensor they were made of",
          "[tensor]") {
  Tensor weights = iota(2, 3);
  Tensor updated(Shape({2, 3}));
  updated.fill(10.0f);
  Tensor second_row = weights.view(3, Shape({3}));  // e.g. one rank's chunk of the weights
  Tensor updated_flat = updated.reshaped(Shape({6}));

  weights.swap_memory(updated);
  for (int64_t i = 0; i < 6; ++i) {
    REQUIRE(weights.data()[i] == 10.0f);
    REQUIRE(updated.data()[i] == static_cast<float>(i));
  }
  // The views read their tensor's new memory: the chunk sees the new weights, the reshape of
  // `updated` sees what `updated` holds now.
  CHECK(second_row.data()[0] == 10.0f);
  CHECK(updated_flat.data()[4] == 4.0f);
  // Writing through a view after the swap lands in the tensor it was made of.
  second_row.mutable_data()[2] = 7.0f;
  CHECK(weights.data()[5] == 7.0f);
}

TEST_CASE("values() copies elements out, and a re-read follows a swap", "[tensor]") {
  Tensor weights({2, 3}), updated({2, 3});
  for (int64_t i = 0; i < 6; ++i) {
    weights.mutable_data()[i] = static_cast<float>(i);
    updated.mutable_data()[i] = static_cast<float>(10 + i);
  }
  const std::vector<float> before = weights.values();
  CHECK(before == std::vector<float>{0, 1, 2, 3, 4, 5});
  CHECK(weights.slice(1, 1, 3).values() == std::vector<float>{1, 2, 4, 5});  // strided
  const float* stale = weights.data();
  weights.swap_memory(updated);
  CHECK(weights.data() != stale);  // the pointer kept from before now reads `updated`
  CHECK(weights.values() == std::vector<float>{10, 11, 12, 13, 14, 15});
  CHECK(before == std::vector<float>{0, 1, 2, 3, 4, 5});  // the copy is unaffected
}

TEST_CASE("a pinned tensor is ordinary host memory where no GPU can pin it", "[tensor]") {
  // test_base links no device backend: the fallback path, zero-filled and writable.
  Tensor t = Tensor::pinned({3, 4}, purine::Location::cpu());
  CHECK_FALSE(t.is_pinned());
  CHECK(t.values() == std::vector<float>(12, 0.0f));
  t.set_values(std::vector<float>(12, 2.5f));
  CHECK(t.values() == std::vector<float>(12, 2.5f));
  CHECK(t.shape() == Shape{3, 4});
}

TEST_CASE("a caller's mistakes on a tensor throw purine::Error naming the shapes", "[tensor]") {
  Tensor t(Shape{2, 3});
  using Catch::Contains;
  CHECK_THROWS_WITH(Tensor().data(),
                    Contains("reading a tensor of shape []") && Contains("that has no memory"));
  CHECK_THROWS_WITH(t.view(4, Shape{3}),
                    "a view of [3] at offset 4 does not fit in a tensor of "
                    "shape [2,3] (6 elements)");
  CHECK_THROWS_WITH(t.slice(2, 0, 1),
                    "slice along axis 2 of a tensor of shape [2,3], which has "
                    "2 axes");
  CHECK_THROWS_WITH(t.slice(1, 2, 4),
                    Contains("slice [2, 4) along axis 1") && Contains("outside [0, 3]"));
  CHECK_THROWS_WITH(t.reshaped(Shape{4}),
                    "reshape of a tensor of shape [2,3] (6 elements) to [4] (4 elements)");
  CHECK_THROWS_WITH(t.slice(1, 0, 2).reshaped(Shape{4}), Contains("reshape of a strided tensor"));
  CHECK_THROWS_WITH(t.set_values({1, 2}), "2 values for a tensor of shape [2,3], which holds 6");
  Tensor other(Shape{3, 2});
  CHECK_THROWS_WITH(t.copy_from(other), Contains("copy of a tensor of shape [3,2]") &&
                                            Contains("into one of shape [2,3]"));
  CHECK_THROWS_WITH(t.swap_memory(other), Contains("swap of a tensor of shape [2,3]"));
  CHECK_THROWS_WITH(Tensor::pinned(Shape{2}, Location::gpu(0)),
                    Contains("cannot be at ") && Contains("gpu0"));
  // Nothing changed on the way.
  CHECK(t.values() == std::vector<float>(6, 0.0f));
}

TEST_CASE("a tensor in channel blocks holds [N, C/b, H, W, b] and reads as [N, C, H, W]",
          "[tensor]") {
  const Shape shape{2, 16, 2, 3};
  std::vector<float> values(static_cast<size_t>(shape.count()));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  Tensor blocked(shape);
  blocked.set_channel_block(8);
  CHECK(blocked.channel_block() == 8);
  blocked.set_values(values);
  CHECK(blocked.values() == values);
  // Element (n, c, h, w) of the plain order lies at ((n 2 + c / 8) 6 + h 3 + w) 8 + c % 8.
  const auto at = [](int64_t n, int64_t c, int64_t h, int64_t w) {
    return ((n * 2 + c / 8) * 6 + h * 3 + w) * 8 + c % 8;
  };
  const auto plain_at = [](int64_t n, int64_t c, int64_t h, int64_t w) {
    return ((n * 16 + c) * 2 + h) * 3 + w;
  };
  for (int64_t n : {0, 1})
    for (int64_t c : {0, 5, 8, 15})
      for (int64_t h : {0, 1})
        for (int64_t w : {0, 2})
          REQUIRE(blocked.data()[at(n, c, h, w)] == values[plain_at(n, c, h, w)]);
  // Copies either way, and between blocks of one size.
  Tensor plain(shape);
  plain.copy_from(blocked);
  CHECK(plain.values() == values);
  Tensor again(shape);
  again.set_channel_block(8);
  again.copy_from(blocked);
  CHECK(std::equal(again.data(), again.data() + again.count(), blocked.data()));
  // A slice of whole images keeps the blocks.
  const Tensor second = blocked.slice(0, 1, 2);
  CHECK(second.channel_block() == 8);
  CHECK(second.values() == std::vector<float>(values.begin() + shape.count() / 2, values.end()));
}

TEST_CASE("a tensor in channel blocks refuses views and blocks that do not fit", "[tensor]") {
  Tensor blocked(Shape{2, 16, 2, 2});
  blocked.set_channel_block(16);
  CHECK_THROWS_WITH(blocked.view(0, Shape{16}), Catch::Contains("held in channel blocks of 16"));
  CHECK_THROWS_WITH(blocked.reshaped(Shape{2, 64}), Catch::Contains("a reshape"));
  CHECK_THROWS_WITH(blocked.slice(1, 0, 8), Catch::Contains("only slices along axis 0"));
  Tensor other(Shape{2, 16, 2, 2});
  other.set_channel_block(8);
  CHECK_THROWS_WITH(other.copy_from(blocked), Catch::Contains("blocks"));
  Tensor odd(Shape{2, 12, 2, 2});
  CHECK_THROWS_WITH(odd.set_channel_block(8), Catch::Contains("C a multiple of the block"));
  Tensor flat(Shape{4, 16});
  CHECK_THROWS_WITH(flat.set_channel_block(8), Catch::Contains("[N, C, H, W]"));
}
