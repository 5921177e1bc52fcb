// Loops over [N, C, H, W] tensors in channel blocks of b (Tensor::channel_block; b a multiple
// of 8) that keep each channel's sums in the plain kernels' order (channel_sums.hpp), for batch
// norm, synchronized batch norm and the bias gradients (operators/cpu/batch_norm.cpp,
// sync_batch_norm.cpp, bias.cpp; the first two build with -ffp-contract=off, as isa_loops.hpp
// asks; the sums of bias.cpp have no products to contract).
#pragma once

#include <glog/logging.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "base/tensor.hpp"
#include "operators/cpu/channel_sums.hpp"
#include "operators/cpu/isa_loops.hpp"
#include "operators/cpu/thread_workspace.hpp"
#include "operators/operator.hpp"

namespace purine::cpu {

// Tensors in channel blocks of b (Tensor::channel_block; b a multiple of 8). The images run in
// parallel, each summing its own row of every channel (8 channels at a time, the vector across
// them, each channel in channel_sums.hpp's order); then each channel adds its images' sums in
// image order, as the plain kernels do: the same bits.
struct ChannelBlocks {
  int64_t n, channels, block, inner;  // N, C, b, H W
  explicit ChannelBlocks(const Tensor& x)
      : n(x.shape()[0]),
        channels(x.shape()[1]),
        block(x.channel_block()),
        inner(x.shape()[2] * x.shape()[3]) {
    CHECK_EQ(block % 8, 0) << "channel blocks of " << block;
  }
  int64_t image() const { return channels * inner; }
  // Where channels [c, c + 8) of pixel 0 of image i start (c a multiple of 8).
  int64_t at(int64_t i, int64_t c) const {
    return i * image() + c / block * inner * block + c % block;
  }
  // total[i C + c] = the sum over pixels s of f(base, s b + c % 8, c) for each image i and
  // channel c, images in parallel, where base = at(i, c - c % 8): f reads the element at
  // base + k.
  template <typename Total, typename F>
  void image_sums(bool parallel, Total* total, F f) const {
    purine::parallel_for_isa(
        n, parallel, [&](int64_t i) __attribute__((always_inline)) {
          for (int64_t c = 0; c < channels; c += 8) {
            Total* sums = total + i * channels + c;
            for (int ch = 0; ch < 8; ++ch) sums[ch] = 0;
            const int64_t base = at(i, c);
            lane_sums_8_channels(
                inner, [&](int64_t s, int ch) { return f(base, s * block + ch, c + ch); }, sums);
          }
        });
  }
  // sums[c] = total[0 C + c] + total[1 C + c] + ... in image order.
  template <typename Total>
  void add_images(const Total* total, Total* sums) const {
    for (int64_t c = 0; c < channels; ++c) sums[c] = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < channels; ++c) sums[c] += total[i * channels + c];
  }
  // f(k, c) for element k of channel c's 8-channel vectors, every element, images in parallel.
  template <typename F>
  void each(bool parallel, F f) const {
    purine::parallel_for_isa(
        n, parallel, [&](int64_t i) __attribute__((always_inline)) {
          for (int64_t c = 0; c < channels; c += 8) {
            const int64_t base = at(i, c);
            for (int64_t s = 0; s < inner; ++s)
              for (int ch = 0; ch < 8; ++ch) f(base + s * block + ch, c + ch);
          }
        });
  }
};

// The channel blocking of an op whose kernel runs ChannelBlocks' loops (blocks of a multiple of
// 8): the listed arguments all in blocks or none.
inline ChannelBlocking uniform_channel_blocks(int block, std::vector<int> inputs,
                                              std::vector<int> outputs = {}) {
  if (block % 8 != 0) return {};
  return ChannelBlocking::make(ChannelBlocking::kUniform, std::move(inputs), std::move(outputs));
}

// `count` doubles of the calling thread's workspace (the per-image and per-channel sums), for
// one kernel's whole run (a second call returns the same memory).
inline double* workspace_doubles(int64_t count) {
  return reinterpret_cast<double*>(thread_workspace(sizeof(double) * count));
}

}  // namespace purine::cpu
