// The GPU kernels' launch geometry (operators/cuda/launch.hpp), checked on the host: every
// element is visited by exactly one thread, for sizes around the block and grid limits.
#include <catch2/catch.hpp>
#include <cstdint>

#include "operators/cuda/launch.hpp"

using namespace purine::cuda;

TEST_CASE("launch geometry covers every element once", "[cuda][launch]") {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{255}, int64_t{256}, int64_t{257},
                    int64_t{kThreads} * kMaxBlocks - 1, int64_t{kThreads} * kMaxBlocks,
                    int64_t{kThreads} * kMaxBlocks * 3 + 17}) {
    const int blocks = blocks_for(n);
    CHECK(blocks >= 1);
    CHECK(blocks <= kMaxBlocks);
    int64_t visited = 0;
    for (int64_t t = 0; t < int64_t{blocks} * kThreads; ++t)
      visited += elements_of_thread(n, blocks, t);
    CHECK(visited == n);
  }
  CHECK(blocks_for(1000) == 4);
  CHECK(blocks_for(int64_t{1} << 40) == kMaxBlocks);
}
