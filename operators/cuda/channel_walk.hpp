// Index arithmetic of the per-channel GPU kernels (channel_kernels.cuh), in host-and-device code
// that the host tests check too (they compile without nvcc). A contiguous tensor is read as
// [N, C, inner] (inner = the product of the dimensions after C; 1 for [N, C]); element i lies in
// plane i / inner (= n C + c) at position i % inner. The walks below divide once when they start
// and then step with additions only: no 64-bit division per element.
#pragma once

#include <algorithm>
#include <cstdint>

#include "operators/cuda/launch.hpp"

namespace purine::cuda {

struct ChannelLayout {
  int64_t samples, channels, inner;
  PURINE_HOST_DEVICE int64_t count() const { return samples * channels * inner; }
};

// Elements start, start + stride, ... of the whole tensor with their channel c (a grid-stride
// loop). Needs count() > 0.
struct ChannelWalk {
  PURINE_HOST_DEVICE ChannelWalk(const ChannelLayout& l, int64_t start, int64_t stride)
      : inner(l.inner),
        channels(l.channels),
        step_j(stride % l.inner),
        step_c(stride / l.inner % l.channels),
        j(start % l.inner),
        c(start / l.inner % l.channels) {}
  // Moving by stride moves the position by step_j and the plane by stride / inner, so the channel
  // by step_c, plus one plane when the position passes the end of its plane. c stays below 2 C,
  // so one subtraction brings it back.
  PURINE_HOST_DEVICE void advance() {
    j += step_j;
    c += step_c;
    if (j >= inner) {
      j -= inner;
      ++c;
    }
    if (c >= channels) c -= channels;
  }
  int64_t inner, channels, step_j, step_c;
  int64_t j, c;  // the current element's position in its plane, and its channel
};

// Values m = start, start + step, ... of channel c, in (sample, position) order: value m is
// position m % inner of sample m / inner, at element offset `at`. Needs inner > 0.
struct PlaneWalk {
  PURINE_HOST_DEVICE PlaneWalk(const ChannelLayout& l, int64_t c, int64_t start, int64_t step)
      : inner(l.inner),
        step_j(step % l.inner),
        step_at(step / l.inner * l.channels * l.inner + step % l.inner),
        next_plane((l.channels - 1) * l.inner),
        j(start % l.inner),
        at((start / l.inner * l.channels + c) * l.inner + start % l.inner) {}
  // Past the end of a plane, the next value of channel c is C - 1 planes further.
  PURINE_HOST_DEVICE void advance() {
    at += step_at;
    j += step_j;
    if (j >= inner) {
      j -= inner;
      at += next_plane;
    }
  }
  int64_t inner, step_j, step_at, next_plane;
  int64_t j, at;
};

// How stage 1 of reduce_channels splits a channel: `slices` blocks per channel, each adding
// `chunk` consecutive values (samples, for inner == 1, where a block covers 32 channels). Each
// thread gets about kPerThread values (kThreads x 16 per block, or 8 warps x 16 samples), with
// at most kMaxSlices blocks per channel (the grid's y dimension; past that, slices grow longer).
// It depends on the shape alone, and so does the order of the sums.
constexpr int64_t kPerThread = 16;
constexpr int64_t kMaxSlices = 1024;

struct Slicing {
  int64_t slices, chunk;
};

inline Slicing slicing_of(const ChannelLayout& l) {
  const int64_t length = l.inner == 1 ? l.samples : l.samples * l.inner;
  const int64_t target = (l.inner == 1 ? kWarpsPerBlock : kThreads) * kPerThread;
  const int64_t slices = std::min(kMaxSlices, std::max<int64_t>(1, (length + target - 1) / target));
  return {slices, (length + slices - 1) / slices};
}

}  // namespace purine::cuda
