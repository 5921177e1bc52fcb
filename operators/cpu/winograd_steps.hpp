// The steps of Winograd's F(2x2, 3x3), F(4x4, 3x3) and F(2x2, 5x5) convolutions
// (conv_winograd.cpp), in AVX2 and FMA: packing an image into groups of 8 channels, the transforms
// of inputs, kernels, products and output gradients, and the register tiles of the GEMMs, one per
// position of the transformed tile. Call them only where the CPU has AVX2 and FMA (winograd_fit).
// Transformed values of tile t, position xi and channel c lie at [xi * step + t * ld + c].
#pragma once

#include <cstdint>

namespace purine::winograd {

constexpr int64_t kLanes = 8;  // channels per group: one AVX2 vector
// Register tiles of the GEMMs: up to kRows rows by up to kVectors vectors of 8 columns.
constexpr int kRows = 6, kVectors = 2;

// packed[((group * hp + pad_h + i) * wp + pad_w + j) * 8 + l] = channel 8 group + l of pixel
// (i, j) of image n of `from` ([N, channels, h, w] in channel blocks of `block`, 0: plain), zero
// in the padding and in the lanes past the last channel.
void pack_image(const float* from, int block, int64_t n, int64_t channels, int64_t h, int64_t w,
                int64_t pad_h, int64_t pad_w, int64_t hp, int64_t wp, float* packed);

// The inverse for an output: image n of `to` ([N, channels, h, w] in `block`s) from the first h
// rows and w columns of `packed` (groups of hp x wp pixels), max(sum + bias, 0) where `bias` is
// given.
void unpack_image(const float* packed, int64_t hp, int64_t wp, int64_t channels, int64_t h,
                  int64_t w, const float* bias, int block, int64_t n, float* to);

// Where a convolution's kernels lie: tap (a, b) joining input channel i to output channel o is
// w[at + o so + i si + a sa + b sb] (the data gradient reads the forward's turned and transposed).
struct TapStrides {
  int64_t at, so, si, sa, sb;
};

// The transforms of F(m x m, r x r), whose tiles are alpha x alpha inputs (alpha = m + r - 1) for
// m x m outputs, and alpha^2 positions (xi = row alpha + column).
struct Transforms {
  int m, r, alpha;
  // v = B' d B for the input tile d of each of `tiles` tiles from `first` on (tile_w tiles a
  // row), each group of 8 channels of `packed` (hp x wp pixels a group).
  void (*inputs)(const float* packed, int64_t groups, int64_t hp, int64_t wp, int64_t tile_w,
                 int64_t first, int64_t tiles, float* v, int64_t ld, int64_t step);
  // The m x m output pixels A' p A of each tile's products p, into `packed` (out_groups groups of
  // oh x ow pixels).
  void (*outputs)(const float* m, int64_t ld, int64_t step, int64_t tiles, int64_t first,
                  int64_t tile_w, int64_t out_groups, int64_t oh, int64_t ow, float* packed);
  // z = A dy A' for the m x m output gradient dy of each tile, read from `packed` (groups of
  // oh x ow pixels, zero past the output plane).
  void (*output_grads)(const float* packed, int64_t groups, int64_t oh, int64_t ow, int64_t tile_w,
                       int64_t first, int64_t tiles, float* z, int64_t ld, int64_t step);
  // u[(xi * in8 + i) * out8 + o] = (G g G')[xi] for the kernel g joining input channel i to
  // output channel o, zero past `in` and `out` channels; for the input channels i in [first,
  // last) of [0, in8) only (a thread's share).
  void (*kernels)(const float* w, const TapStrides& taps, int64_t in, int64_t out, int64_t in8,
                  int64_t out8, int64_t first, int64_t last, float* u);
  // dw[o][i][a][b] = (G' du G)[a][b] for du[(xi * in8 + i) * out8 + o], o < out and the input
  // channels i in [first, last) of [0, in) only.
  void (*kernel_gradient)(const float* du, int64_t in, int64_t out, int64_t in8, int64_t out8,
                          int64_t first, int64_t last, float* dw);
};
const Transforms& transforms_2x2_3x3();  // winograd_steps.cpp
const Transforms& transforms_4x4_3x3();  // winograd_6x6.cpp
const Transforms& transforms_2x2_5x5();  // winograd_6x6.cpp

// A register tile: m[r][j] = (or += with gemm_add_tile_of) the sum over k < depth of a[r][k]
// b[k][j] for `rows` rows and `vectors` vectors of 8 columns, k in order. gemm_tile_of's a is
// row-major (a[r][k] at a + r lda + k), gemm_add_tile_of's transposed (a[r][k] at a + k lda + r).
using GemmTile = void (*)(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t depth,
                          float* m, int64_t ldm);
GemmTile gemm_tile_of(int rows, int vectors);
GemmTile gemm_add_tile_of(int rows, int vectors);

}  // namespace purine::winograd
