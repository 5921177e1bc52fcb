// The per-channel GPU kernels' index arithmetic (operators/cuda/channel_walk.hpp), checked on the
// host by running the kernels' loops serially: the walks that step by additions reach the same
// elements and channels as dividing would, and the slices of the two-stage reductions cover each
// channel's values exactly once.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "operators/cuda/channel_walk.hpp"

using namespace purine::cuda;

namespace {

const std::vector<ChannelLayout>& layouts() {
  static const std::vector<ChannelLayout> all{
      {1, 1, 1},   {3, 1, 1},     {5, 7, 1},      {64, 1000, 1}, {1, 1, 1000},  {2, 3, 255},
      {2, 3, 256}, {2, 3, 257},   {4, 5, 49},     {3, 2, 7},     {17, 5, 9},    {64, 3, 784},
      {1, 4, 17},  {2, 1, 90300}, {9, 2, 100000}, {1, 1, 5000},  {3, 33, 1024}, {7, 3, 4099},
  };
  return all;
}

}  // namespace

TEST_CASE("ChannelWalk follows each element's channel for any stride", "[cuda][launch]") {
  for (const ChannelLayout& l : layouts()) {
    for (int64_t stride : {int64_t{1}, int64_t{7}, int64_t{256}, int64_t{1000}, int64_t{65536},
                           int64_t{kThreads} * kMaxBlocks}) {
      INFO(l.samples << " x " << l.channels << " x " << l.inner << ", stride " << stride);
      const int64_t count = l.count();
      int64_t wrong = 0, visited = 0;
      // A few threads: the first ones, one in the middle, the last of the grid.
      for (int64_t start : {int64_t{0}, int64_t{1}, stride / 2, stride - 1}) {
        int64_t i = start;
        for (ChannelWalk walk(l, i, stride); i < count; i += stride, walk.advance()) {
          wrong += walk.c != i / l.inner % l.channels || walk.j != i % l.inner;
          ++visited;
        }
      }
      CHECK(wrong == 0);
      CHECK((count == 0 || visited > 0));
    }
  }
}

TEST_CASE("the reduction slices cover every value of a channel once", "[cuda][launch]") {
  for (const ChannelLayout& l : layouts()) {
    INFO(l.samples << " x " << l.channels << " x " << l.inner);
    const Slicing s = slicing_of(l);
    CHECK(s.slices >= 1);
    CHECK(s.slices <= kMaxSlices);
    const int64_t length = l.inner == 1 ? l.samples : l.samples * l.inner;
    CHECK(s.slices * s.chunk >= length);
    if (l.inner == 1) continue;  // the column path indexes n C + c directly
    // Stage 1's loop for every thread of every slice of the first, a middle and the last channel.
    for (int64_t c : {int64_t{0}, l.channels / 2, l.channels - 1}) {
      std::vector<int> seen(static_cast<size_t>(l.count()), 0);
      int64_t wrong = 0;
      for (int64_t slice = 0; slice < s.slices; ++slice) {
        const int64_t begin = slice * s.chunk, end = std::min(begin + s.chunk, length);
        for (int64_t t = 0; t < kThreads; ++t) {
          int64_t m = begin + t;
          if (m >= end) continue;
          for (PlaneWalk walk(l, c, m, kThreads); m < end; m += kThreads, walk.advance()) {
            const int64_t expected = (m / l.inner * l.channels + c) * l.inner + m % l.inner;
            wrong += walk.at != expected;
            ++seen[static_cast<size_t>(expected)];
          }
        }
      }
      CHECK(wrong == 0);
      int64_t once = 0, other = 0;
      for (int64_t i = 0; i < l.count(); ++i) {
        const bool mine = i / l.inner % l.channels == c;
        once += mine && seen[static_cast<size_t>(i)] == 1;
        other += !mine && seen[static_cast<size_t>(i)] != 0;
      }
      CHECK(once == length);
      CHECK(other == 0);
    }
  }
  CHECK(slicing_of({128, 64, 112 * 112}).slices == 392);  // GoogLeNet's conv1 bias gradient
  CHECK(slicing_of({1, 1, int64_t{1} << 32}).slices == kMaxSlices);
}
