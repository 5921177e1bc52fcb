// Sums over a row of floats in a fixed order (eight interleaved float partial sums, added in
// double at the end), so that any thread count gives equal bits. Shared by batch_norm and
// sync_batch_norm (operators/cpu/batch_norm.cpp, sync_batch_norm.cpp), and in channel blocks by
// the bias gradients.
#pragma once

#include <cstdint>

namespace purine::cpu {

// Sum of f(i) for i in [0, n).
// (Always inlined: the batch norms' copies for each vector ISA, isa_loops.hpp, compile them in.)
template <typename F>
inline __attribute__((always_inline)) double lane_sum(int64_t n, F f) {
  float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] += f(i + l);
  }
  for (int l = 0; i < n; ++i, ++l) lanes[l] += f(i);
  double total = 0;
  for (int l = 0; l < 8; ++l) total += lanes[l];
  return total;
}

// Sum of p.
inline __attribute__((always_inline)) double row_sum(const float* p, int64_t n) {
  return lane_sum(n, [p](int64_t i) { return p[i]; });
}
// Sum of (p - mean)^2.
inline __attribute__((always_inline)) double row_square_sum(const float* p, int64_t n, float mean) {
  return lane_sum(n, [p, mean](int64_t i) { return (p[i] - mean) * (p[i] - mean); });
}
// Sum of g * (p - mean).
inline __attribute__((always_inline)) double row_dot_centered(const float* g, const float* p,
                                                              int64_t n, float mean) {
  return lane_sum(n, [g, p, mean](int64_t i) { return g[i] * (p[i] - mean); });
}

// The same sums for 8 channels at once, in channel blocks (Tensor::channel_block): f(i, ch) is
// element i of channel ch's row, and total[ch] += the row's sum, rounded as lane_sum rounds
// each channel's row alone (the channels are the vector; each keeps its own eight lanes). With
// Total = float, the eight lanes are added in float, as the bias gradient's sums are
// (operators/cpu/bias.cpp).
template <typename Total, typename F>
inline __attribute__((always_inline)) void lane_sums_8_channels(int64_t n, F f, Total* total) {
  float lanes[8][8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l)
      for (int ch = 0; ch < 8; ++ch) lanes[l][ch] += f(i + l, ch);
  }
  for (int l = 0; i < n; ++i, ++l)
    for (int ch = 0; ch < 8; ++ch) lanes[l][ch] += f(i, ch);
  for (int ch = 0; ch < 8; ++ch) {
    Total sum = 0;
    for (int l = 0; l < 8; ++l) sum += lanes[l][ch];
    total[ch] += sum;
  }
}

}  // namespace purine::cpu
