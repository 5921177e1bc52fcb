// Channel by channel, summing a plane of 4 pixels (GoogLeNet-28's 2x2 planes) is a call with a
// few scalar adds for every image and channel. Here a block of L channels of one image is turned
// pixel-major by vector shuffles (lane_tiles.hpp), and the same adds run on vectors of L
// channels: pixel q goes into partial sum q % 8, the eight partials are added in order, and the
// images' sums are added in image order, each lane in the scalar order of its channel.
#include "operators/cpu/plane_sums.hpp"

#include <algorithm>

#include "operators/cpu/lane_tiles.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/cpu/vector_isa.hpp"

namespace purine {

namespace {

// db[first .. first + L) for block `block` of L channels (fewer in the last block).
template <int L>
PURINE_LANES_INLINE void sum_block(int64_t n, int64_t c, int64_t inner, const float* d,
                                   int64_t block, float* db) {
  using Lanes = typename LaneTypes<L>::Lanes;
  const int64_t first = block * L, lanes = std::min<int64_t>(L, c - first);
  // Pixel q of the block's planes at rows[q * L] (lanes past `lanes` stay zero: summed, never
  // stored).
  float rows[kMaxSummedPlane * L] = {};
  Lanes total = {};
  for (int64_t i = 0; i < n; ++i) {
    LaneTiles<L>::to_rows(d + (i * c + first) * inner, inner, lanes, rows, L);
    Lanes partial[8] = {};
    for (int64_t q = 0; q < inner; ++q) partial[q % 8] += LaneTiles<L>::load(rows + q * L);
    Lanes plane = {};
    for (int l = 0; l < 8; ++l) plane += partial[l];
    total += plane;
  }
  for (int64_t l = 0; l < lanes; ++l) db[first + l] = total[l];
}

// The versions for each ISA (vector_isa.hpp): blocks of 16, 8 and 4 channels.
__attribute__((target("avx512f"))) void sum_avx512(int64_t n, int64_t c, int64_t inner,
                                                   const float* d, int64_t block, float* db) {
  sum_block<16>(n, c, inner, d, block, db);
}
__attribute__((target("avx2"))) void sum_avx2(int64_t n, int64_t c, int64_t inner, const float* d,
                                              int64_t block, float* db) {
  sum_block<8>(n, c, inner, d, block, db);
}
void sum_baseline(int64_t n, int64_t c, int64_t inner, const float* d, int64_t block, float* db) {
  sum_block<4>(n, c, inner, d, block, db);
}

}  // namespace

void sum_small_planes(int64_t n, int64_t c, int64_t inner, const float* d, float* db) {
  const int lanes = vector_isa() == VectorIsa::kAvx512 ? 16
                    : vector_isa() == VectorIsa::kAvx2 ? 8
                                                       : 4;
  const int64_t blocks = (c + lanes - 1) / lanes;
  parallel_for(blocks, n * c * inner > kParallelMinArithmetic, [&](int64_t block) {
    call_for_vector_isa(sum_avx512, sum_avx2, sum_baseline, n, c, inner, d, block, db);
  });
}

}  // namespace purine
