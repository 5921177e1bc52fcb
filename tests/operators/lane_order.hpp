// The order of operations of the CPU batch norms' row sums (operators/cpu/channel_sums.hpp),
// written plainly, for tests that check every vector version's bits against it.
#pragma once

#include <cstdint>

namespace purine::testing {

// Sum of f(i) for i < n: eight interleaved float partial sums (element i into i % 8), then those
// eight added in double.
template <typename F>
double eight_lane_sum(int64_t n, F f) {
  float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t i = 0; i < n; ++i) lanes[i % 8] += f(i);
  double total = 0;
  for (float lane : lanes) total += lane;
  return total;
}

}  // namespace purine::testing
