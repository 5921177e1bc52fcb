// The bias gradient's sums over small planes, L channels at a time as vectors (plane_sums.cpp).
#pragma once

#include <cstdint>

namespace purine {

// Planes of at most this many pixels go by plane_sums (bias.cpp's sum_channels).
constexpr int64_t kMaxSummedPlane = 64;

// db[j] = the sum over images i (in order) of the sum of plane d[i, j] [inner], that sum taken
// as bias.cpp's sum_floats does (eight interleaved partial sums, then those eight in order), so
// the bits are those of summing channel by channel. d is [n, c, inner] with inner <=
// kMaxSummedPlane. Threaded over blocks of channels on the caller's OpenMP team when large.
void sum_small_planes(int64_t n, int64_t c, int64_t inner, const float* d, float* db);

}  // namespace purine
