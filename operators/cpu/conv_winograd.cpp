// 3x3 stride-1 convolutions by Winograd's minimal filtering F(2x2, 3x3) (Lavin and Gray, "Fast
// Algorithms for Convolutional Neural Networks", 2015): each 2x2 tile of output pixels is
// computed from the 4x4 input tile under it as 16 products of transformed values, where the
// direct convolution multiplies 36 times. Per tile and per pair of channels:
//   V = B' d B (input tile d, 4x4),  U = G g G' (kernel g, 3x3 -> 4x4),  y = A' (U . V) A (2x2).
// Summed over input channels, the 16 elementwise products become 16 GEMMs, one per position xi
// of the 4x4 tile: M[xi][tile][out] = sum over in of V[xi][tile][in] U[xi][in][out], 2.25x
// fewer multiply-adds than the direct convolution, in register tiles of 6 tiles by 16 output
// channels (AVX2 FMA). The data gradient is the same convolution of dy with the kernels turned
// by 180 degrees, inputs and outputs exchanged, and pad 2 - pad.
//
// Each image is packed into a zero-padded buffer in groups of 8 channels (one vector per pixel),
// from plain order or from channel blocks of 8 or 16 as they are; its tiles are transformed,
// multiplied and transformed back in blocks that stay in L2; and the output is unpacked into
// its layout (bias and ReLU added there for conv_bias_relu, after the whole sum, as the separate
// ops round). Every output pixel is summed by one thread in a fixed order: the bits depend on the
// geometry alone, not on the thread count or the layouts. They are not the direct convolution's:
// the transforms add and halve in other orders (errors of a few units in the last place of the
// sum's largest terms), and an infinite input can turn more of the output NaN than it would.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "operators/cpu/conv_kernel.hpp"
#include "operators/cpu/thread_workspace.hpp"
#include "operators/cpu/vector_isa.hpp"

namespace purine {

namespace {

#define PURINE_AVX2 __attribute__((target("avx2,fma")))
#define PURINE_AVX2_INLINE inline __attribute__((target("avx2,fma"), always_inline))

constexpr int64_t kLanes = 8;       // channels per group: one AVX2 vector
constexpr int64_t kPositions = 16;  // of the 4x4 transformed tile
// A block of tiles keeps its transformed inputs and products (V and M) under this many bytes
// (L1); in the weight gradient, whose products accumulate over the tiles, V and A dy A' (L2).
constexpr int64_t kBlockBytes = int64_t{24} << 10;
constexpr int64_t kWeightBlockBytes = int64_t{512} << 10;
// Register tile of the GEMMs: rows (tiles) by vectors of 8 output channels.
constexpr int kRows = 6, kVectors = 2;

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// The convolution the kernel runs (the data gradient's is the forward of dy): `in` channels of
// in_h x in_w to `out` channels of out_h x out_w, 3x3 taps, stride 1.
struct Problem {
  int64_t n, in, in_h, in_w, out, out_h, out_w, pad_h, pad_w;
  int in_block, out_block;  // channel blocks of the input and output tensors (0: plain)
  // Tap (a, b) joining input channel i to output channel o is w[at + o so + i si + a sa + b sb].
  int64_t at, so, si, sa, sb;
};

// The address of channel c's pixel p in image n of a [N, channels, pixels] tensor in `block`s.
inline int64_t element(int64_t n, int64_t channels, int64_t pixels, int block, int64_t c,
                       int64_t p) {
  if (block == 0) return (n * channels + c) * pixels + p;
  return ((n * channels / block + c / block) * pixels + p) * block + c % block;
}

// 8x8 transpose of rows r[0..8) in place.
PURINE_AVX2_INLINE void transpose8(__m256* r) {
  __m256 t[8], s[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    s[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x31);
  }
}

// packed[((group * hp + pad_h + i) * wp + pad_w + j) * 8 + l] = channel 8 group + l of pixel
// (i, j) of image n of `from` ([N, channels, h, w] in `block`s), zero in the padding and in the
// lanes past the last channel.
PURINE_AVX2 void pack_image(const float* from, int block, int64_t n, int64_t channels, int64_t h,
                            int64_t w, int64_t pad_h, int64_t pad_w, int64_t hp, int64_t wp,
                            float* packed) {
  const int64_t groups = (channels + kLanes - 1) / kLanes, pixels = h * w;
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t group = 0; group < groups; ++group) {
    float* plane = packed + group * hp * wp * kLanes;
    for (int64_t i = 0; i < hp; ++i) {
      float* row = plane + i * wp * kLanes;
      if (i < pad_h || i >= pad_h + h) {
        for (int64_t j = 0; j < wp; ++j) _mm256_storeu_ps(row + j * kLanes, zero);
        continue;
      }
      for (int64_t j = 0; j < pad_w; ++j) _mm256_storeu_ps(row + j * kLanes, zero);
      for (int64_t j = pad_w + w; j < wp; ++j) _mm256_storeu_ps(row + j * kLanes, zero);
    }
    const int64_t c0 = group * kLanes, lanes = std::min(kLanes, channels - c0);
    for (int64_t i = 0; i < h; ++i) {
      float* row = plane + ((pad_h + i) * wp + pad_w) * kLanes;
      const int64_t p0 = i * w;
      if (block != 0) {  // 8 consecutive floats per pixel
        const float* src = from + element(n, channels, pixels, block, c0, p0);
        for (int64_t j = 0; j < w; ++j)
          _mm256_storeu_ps(row + j * kLanes, _mm256_loadu_ps(src + j * block));
        continue;
      }
      int64_t j = 0;
      if (lanes == kLanes) {
        const float* src = from + element(n, channels, pixels, 0, c0, p0);
        for (; j + kLanes <= w; j += kLanes) {
          __m256 r[8];
          for (int l = 0; l < 8; ++l) r[l] = _mm256_loadu_ps(src + l * pixels + j);
          transpose8(r);
          for (int q = 0; q < 8; ++q) _mm256_storeu_ps(row + (j + q) * kLanes, r[q]);
        }
      }
      for (; j < w; ++j)
        for (int64_t l = 0; l < kLanes; ++l)
          row[j * kLanes + l] =
              l < lanes ? from[element(n, channels, pixels, 0, c0 + l, p0 + j)] : 0.0f;
    }
  }
}

// max(v + b, 0) where there is a bias, else v.
PURINE_AVX2_INLINE __m256 finish(__m256 v, const float* bias, __m256 b) {
  return bias ? _mm256_max_ps(_mm256_add_ps(v, b), _mm256_setzero_ps()) : v;
}

// The inverse for the output: image n of `to` ([N, channels, h, w] in `block`s) from the
// unpadded rows of `packed` (wp pixels apart; groups hp rows apart), max(sum + bias, 0) where
// `bias` is given.
PURINE_AVX2 void unpack_image(const float* packed, int64_t hp, int64_t wp, int64_t channels,
                              int64_t h, int64_t w, const float* bias, int block, int64_t n,
                              float* to) {
  const int64_t groups = (channels + kLanes - 1) / kLanes, pixels = h * w;
  alignas(32) float lanes_bias[kLanes] = {};
  for (int64_t group = 0; group < groups; ++group) {
    const float* plane = packed + group * hp * wp * kLanes;
    const int64_t c0 = group * kLanes, lanes = std::min(kLanes, channels - c0);
    if (bias)
      for (int64_t l = 0; l < kLanes; ++l) lanes_bias[l] = l < lanes ? bias[c0 + l] : 0.0f;
    const __m256 b = _mm256_load_ps(lanes_bias);
    for (int64_t i = 0; i < h; ++i) {
      const float* row = plane + i * wp * kLanes;
      const int64_t p0 = i * w;
      if (block != 0) {
        float* dst = to + element(n, channels, pixels, block, c0, p0);
        for (int64_t j = 0; j < w; ++j)
          _mm256_storeu_ps(dst + j * block, finish(_mm256_loadu_ps(row + j * kLanes), bias, b));
        continue;
      }
      int64_t j = 0;
      if (lanes == kLanes) {
        float* dst = to + element(n, channels, pixels, 0, c0, p0);
        for (; j + kLanes <= w; j += kLanes) {
          __m256 r[8];
          for (int q = 0; q < 8; ++q)
            r[q] = finish(_mm256_loadu_ps(row + (j + q) * kLanes), bias, b);
          transpose8(r);
          for (int l = 0; l < 8; ++l) _mm256_storeu_ps(dst + l * pixels + j, r[l]);
        }
      }
      for (; j < w; ++j) {
        alignas(32) float v[kLanes];
        _mm256_store_ps(v, finish(_mm256_loadu_ps(row + j * kLanes), bias, b));
        for (int64_t l = 0; l < lanes; ++l)
          to[element(n, channels, pixels, 0, c0 + l, p0 + j)] = v[l];
      }
    }
  }
}

// v[(xi * tiles + t) * ld + 8 group + l] = (B' d B)[xi] for the 4x4 input tile d of each tile t
// of `tiles` from `first` on (tile_w tiles a row) and each group of 8 channels.
PURINE_AVX2 void transform_inputs(const float* packed, int64_t groups, int64_t hp, int64_t wp,
                                  int64_t tile_w, int64_t first, int64_t tiles, float* v,
                                  int64_t ld) {
  int64_t th = first / tile_w, tw = first % tile_w;
  for (int64_t t = 0; t < tiles; ++t, tw = tw + 1 == tile_w ? (++th, 0) : tw + 1) {
    for (int64_t group = 0; group < groups; ++group) {
      const float* d = packed + ((group * hp + 2 * th) * wp + 2 * tw) * kLanes;
      __m256 x[4][4];
      for (int r = 0; r < 4; ++r) {
        __m256 row[4];
        for (int s = 0; s < 4; ++s) row[s] = _mm256_loadu_ps(d + (r * wp + s) * kLanes);
        x[r][0] = _mm256_sub_ps(row[0], row[2]);
        x[r][1] = _mm256_add_ps(row[1], row[2]);
        x[r][2] = _mm256_sub_ps(row[2], row[1]);
        x[r][3] = _mm256_sub_ps(row[1], row[3]);
      }
      float* out = v + t * ld + group * kLanes;
      const int64_t step = tiles * ld;
      for (int s = 0; s < 4; ++s) {
        _mm256_storeu_ps(out + (0 * 4 + s) * step, _mm256_sub_ps(x[0][s], x[2][s]));
        _mm256_storeu_ps(out + (1 * 4 + s) * step, _mm256_add_ps(x[1][s], x[2][s]));
        _mm256_storeu_ps(out + (2 * 4 + s) * step, _mm256_sub_ps(x[2][s], x[1][s]));
        _mm256_storeu_ps(out + (3 * 4 + s) * step, _mm256_sub_ps(x[1][s], x[3][s]));
      }
    }
  }
}

// The inverse transform A' m A of each tile's products into the 2x2 output pixels of `packed`
// (out_groups groups, oh x ow pixels each; tiles from `first` on, tile_w a row).
PURINE_AVX2 void transform_outputs(const float* m, int64_t ld, int64_t tiles, int64_t first,
                                   int64_t tile_w, int64_t out_groups, int64_t oh, int64_t ow,
                                   float* packed) {
  const int64_t step = tiles * ld;
  int64_t th = first / tile_w, tw = first % tile_w;
  for (int64_t t = 0; t < tiles; ++t, tw = tw + 1 == tile_w ? (++th, 0) : tw + 1) {
    for (int64_t group = 0; group < out_groups; ++group) {
      const float* in = m + t * ld + group * kLanes;
      __m256 s[2][4];
      for (int c = 0; c < 4; ++c) {
        const __m256 m0 = _mm256_loadu_ps(in + (0 * 4 + c) * step),
                     m1 = _mm256_loadu_ps(in + (1 * 4 + c) * step),
                     m2 = _mm256_loadu_ps(in + (2 * 4 + c) * step),
                     m3 = _mm256_loadu_ps(in + (3 * 4 + c) * step);
        s[0][c] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
        s[1][c] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
      }
      float* out = packed + ((group * oh + 2 * th) * ow + 2 * tw) * kLanes;
      for (int r = 0; r < 2; ++r) {
        _mm256_storeu_ps(out + r * ow * kLanes,
                         _mm256_add_ps(_mm256_add_ps(s[r][0], s[r][1]), s[r][2]));
        _mm256_storeu_ps(out + (r * ow + 1) * kLanes,
                         _mm256_sub_ps(_mm256_sub_ps(s[r][1], s[r][2]), s[r][3]));
      }
    }
  }
}

// m[r][j] = sum over k < depth of v[r][k] u[k][j] for R rows and V vectors of 8 columns.
template <int R, int V>
PURINE_AVX2 void gemm_tile(const float* v, int64_t ldv, const float* u, int64_t ldu, int64_t depth,
                           float* m, int64_t ldm) {
  __m256 acc[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < V; ++j) acc[r][j] = _mm256_setzero_ps();
  for (int64_t k = 0; k < depth; ++k) {
    __m256 col[V];
#pragma GCC unroll 2
    for (int j = 0; j < V; ++j) col[j] = _mm256_loadu_ps(u + k * ldu + j * kLanes);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(v + r * ldv + k);
#pragma GCC unroll 2
      for (int j = 0; j < V; ++j) acc[r][j] = _mm256_fmadd_ps(a, col[j], acc[r][j]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < V; ++j) _mm256_storeu_ps(m + r * ldm + j * kLanes, acc[r][j]);
}

using GemmTile = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t);

GemmTile gemm_tile_of(int rows, int vectors) {
  static const GemmTile tiles[kRows][kVectors] = {
      {gemm_tile<1, 1>, gemm_tile<1, 2>}, {gemm_tile<2, 1>, gemm_tile<2, 2>},
      {gemm_tile<3, 1>, gemm_tile<3, 2>}, {gemm_tile<4, 1>, gemm_tile<4, 2>},
      {gemm_tile<5, 1>, gemm_tile<5, 2>}, {gemm_tile<6, 1>, gemm_tile<6, 2>}};
  return tiles[rows - 1][vectors - 1];
}

// u[(xi * in8 + i) * out8 + o] = (G g G')[xi] for the kernel g joining input channel i to output
// channel o (zero past the last channels), 8 output channels a vector.
PURINE_AVX2 void transform_weights(const Problem& p, const float* w, int64_t in8, int64_t out8,
                                   float* u) {
  const __m256 half = _mm256_set1_ps(0.5f);
  for (int64_t i = 0; i < in8; ++i) {
    for (int64_t o0 = 0; o0 < out8; o0 += kLanes) {
      __m256 g[3][3];
      for (int a = 0; a < 3; ++a)
        for (int b = 0; b < 3; ++b) {
          alignas(32) float taps[kLanes];
          for (int64_t l = 0; l < kLanes; ++l)
            taps[l] = i < p.in && o0 + l < p.out
                          ? w[p.at + (o0 + l) * p.so + i * p.si + a * p.sa + b * p.sb]
                          : 0.0f;
          g[a][b] = _mm256_load_ps(taps);
        }
      __m256 t[4][3];
      for (int b = 0; b < 3; ++b) {
        t[0][b] = g[0][b];
        t[1][b] = _mm256_mul_ps(half, _mm256_add_ps(_mm256_add_ps(g[0][b], g[1][b]), g[2][b]));
        t[2][b] = _mm256_mul_ps(half, _mm256_add_ps(_mm256_sub_ps(g[0][b], g[1][b]), g[2][b]));
        t[3][b] = g[2][b];
      }
      for (int r = 0; r < 4; ++r) {
        const __m256 row[4] = {
            t[r][0], _mm256_mul_ps(half, _mm256_add_ps(_mm256_add_ps(t[r][0], t[r][1]), t[r][2])),
            _mm256_mul_ps(half, _mm256_add_ps(_mm256_sub_ps(t[r][0], t[r][1]), t[r][2])), t[r][2]};
        for (int s = 0; s < 4; ++s)
          _mm256_storeu_ps(u + ((r * 4 + s) * in8 + i) * out8 + o0, row[s]);
      }
    }
  }
}

// The convolution that `direction` of `g` runs (the weight gradient's: the forward's).
Problem problem_of(ConvDirection direction, const ConvGeometry& g, ConvBlocks blocks) {
  Problem p;
  p.n = g.n;
  p.out_block = blocks.out;
  p.in_block = blocks.a;
  if (direction == ConvDirection::kForward) {
    p.in = g.c, p.in_h = g.h, p.in_w = g.w, p.out = g.o, p.out_h = g.ho, p.out_w = g.wo;
    p.pad_h = g.pad_h, p.pad_w = g.pad_w;
    p.at = 0, p.so = g.c * 9, p.si = 9, p.sa = 3, p.sb = 1;
  } else {  // dx = the forward of dy with the kernels turned and transposed
    p.in = g.o, p.in_h = g.ho, p.in_w = g.wo, p.out = g.c, p.out_h = g.h, p.out_w = g.w;
    p.pad_h = 2 - g.pad_h, p.pad_w = 2 - g.pad_w;
    p.at = 8, p.so = 9, p.si = g.c * 9, p.sa = -3, p.sb = -1;
  }
  return p;
}

class WinogradKernel : public ConvKernel {
 public:
  WinogradKernel(ConvDirection direction, const ConvGeometry& g, int threads, bool bias_relu,
                 ConvBlocks blocks)
      : ConvKernel(direction, g, threads, bias_relu, blocks), p_(problem_of(direction, g, blocks)) {
    in8_ = round_up(p_.in, kLanes);
    out8_ = round_up(p_.out, kLanes);
    tile_h_ = (p_.out_h + 1) / 2;
    tile_w_ = (p_.out_w + 1) / 2;
    hp_ = 2 * tile_h_ + 2;
    wp_ = 2 * tile_w_ + 2;
    const int64_t image_tiles = tile_h_ * tile_w_;
    block_tiles_ = std::min(
        image_tiles,
        std::max<int64_t>(1, kBlockBytes / (4 * kPositions * (in8_ + out8_)) / kRows) * kRows);
    u_at_ = workspace_.add(sizeof(float) * kPositions * in8_ * out8_);
    packed_at_ = per_thread_.add(sizeof(float) * in8_ * hp_ * wp_);
    v_at_ = per_thread_.add(sizeof(float) * kPositions * block_tiles_ * in8_);
    m_at_ = per_thread_.add(sizeof(float) * kPositions * block_tiles_ * out8_);
    out_at_ = per_thread_.add(sizeof(float) * out8_ * 4 * image_tiles);
    threads_at_ = workspace_.add(per_thread_.bytes() * team_);
  }

  std::string name() const override { return "winograd:F(2x2,3x3)"; }

  void run(const float* a, const float* w, const float* bias, float* out) override {
    OmpThreads scope(team_);
    char* workspace = thread_workspace(workspace_.bytes());
    float* u = workspace_floats(workspace, u_at_);
    transform_weights(p_, w, in8_, out8_, u);
    char* threads = workspace + threads_at_;
    parallel_region(team_ > 1, [&] {
      char* mine = threads + per_thread_.bytes() * (team_ > 1 ? omp_get_thread_num() : 0);
#pragma omp for schedule(static)
      for (int64_t n = 0; n < p_.n; ++n) image(a, u, bias, n, out, mine);
    });
  }

 private:
  void image(const float* in, const float* u, const float* bias, int64_t n, float* out,
             char* workspace) const {
    float* packed = workspace_floats(workspace, packed_at_);
    float* v = workspace_floats(workspace, v_at_);
    float* m = workspace_floats(workspace, m_at_);
    float* outputs = workspace_floats(workspace, out_at_);
    pack_image(in, p_.in_block, n, p_.in, p_.in_h, p_.in_w, p_.pad_h, p_.pad_w, hp_, wp_, packed);
    const int64_t image_tiles = tile_h_ * tile_w_;
    for (int64_t first = 0; first < image_tiles; first += block_tiles_) {
      const int64_t tiles = std::min(block_tiles_, image_tiles - first);
      transform_inputs(packed, in8_ / kLanes, hp_, wp_, tile_w_, first, tiles, v, in8_);
      for (int64_t xi = 0; xi < kPositions; ++xi) {
        const float* vx = v + xi * tiles * in8_;
        const float* ux = u + xi * in8_ * out8_;
        float* mx = m + xi * tiles * out8_;
        for (int64_t o = 0; o < out8_; o += kVectors * kLanes) {
          const int vectors = static_cast<int>(std::min<int64_t>(kVectors, (out8_ - o) / kLanes));
          for (int64_t t = 0; t < tiles; t += kRows) {
            const int rows = static_cast<int>(std::min<int64_t>(kRows, tiles - t));
            gemm_tile_of(rows, vectors)(vx + t * in8_, in8_, ux + o, out8_, in8_,
                                        mx + t * out8_ + o, out8_);
          }
        }
      }
      transform_outputs(m, out8_, tiles, first, tile_w_, out8_ / kLanes, 2 * tile_h_, 2 * tile_w_,
                        outputs);
    }
    unpack_image(outputs, 2 * tile_h_, 2 * tile_w_, p_.out, p_.out_h, p_.out_w,
                 bias_relu_ ? bias : nullptr, p_.out_block, n, out);
  }

  const Problem p_;
  int64_t in8_, out8_;          // channels rounded up to groups of 8
  int64_t tile_h_, tile_w_;     // output tiles per column and row
  int64_t hp_, wp_;             // the packed input's padded height and width
  int64_t block_tiles_;         // tiles transformed and multiplied at once
  WorkspaceLayout workspace_;   // the transformed weights, then per_thread_ for each thread
  WorkspaceLayout per_thread_;  // packed input, V, M and the packed output of one image
  size_t u_at_, threads_at_, packed_at_, v_at_, m_at_, out_at_;
};

// z[(xi * tiles + t) * ld + 8 group + l] = (A dy A')[xi] for the 2x2 output gradient dy of each
// tile t of `tiles` from `first` on, read from `packed` (groups of oh x ow pixels, zero past the
// output plane).
PURINE_AVX2 void transform_output_grads(const float* packed, int64_t groups, int64_t oh, int64_t ow,
                                        int64_t tile_w, int64_t first, int64_t tiles, float* z,
                                        int64_t ld) {
  const int64_t step = tiles * ld;
  int64_t th = first / tile_w, tw = first % tile_w;
  for (int64_t t = 0; t < tiles; ++t, tw = tw + 1 == tile_w ? (++th, 0) : tw + 1) {
    for (int64_t group = 0; group < groups; ++group) {
      const float* dy = packed + ((group * oh + 2 * th) * ow + 2 * tw) * kLanes;
      __m256 c[2][4];  // A dy: 4 rows of the 2 columns
      for (int col = 0; col < 2; ++col) {
        const __m256 y0 = _mm256_loadu_ps(dy + col * kLanes),
                     y1 = _mm256_loadu_ps(dy + (ow + col) * kLanes);
        c[col][0] = y0;
        c[col][1] = _mm256_add_ps(y0, y1);
        c[col][2] = _mm256_sub_ps(y0, y1);
        c[col][3] = _mm256_sub_ps(_mm256_setzero_ps(), y1);
      }
      float* out = z + t * ld + group * kLanes;
      for (int r = 0; r < 4; ++r) {
        const __m256 y0 = c[0][r], y1 = c[1][r];
        _mm256_storeu_ps(out + (r * 4 + 0) * step, y0);
        _mm256_storeu_ps(out + (r * 4 + 1) * step, _mm256_add_ps(y0, y1));
        _mm256_storeu_ps(out + (r * 4 + 2) * step, _mm256_sub_ps(y0, y1));
        _mm256_storeu_ps(out + (r * 4 + 3) * step, _mm256_sub_ps(_mm256_setzero_ps(), y1));
      }
    }
  }
}

// du[r][j] += the sum over t < depth, in order, of v[t][r] z[t][j] for R rows and V vectors of 8
// columns.
template <int R, int V>
PURINE_AVX2 void gemm_add_tile(const float* v, int64_t ldv, const float* z, int64_t ldz,
                               int64_t depth, float* du, int64_t lddu) {
  __m256 acc[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < V; ++j) acc[r][j] = _mm256_loadu_ps(du + r * lddu + j * kLanes);
  for (int64_t t = 0; t < depth; ++t) {
    __m256 col[V];
#pragma GCC unroll 2
    for (int j = 0; j < V; ++j) col[j] = _mm256_loadu_ps(z + t * ldz + j * kLanes);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(v + t * ldv + r);
#pragma GCC unroll 2
      for (int j = 0; j < V; ++j) acc[r][j] = _mm256_fmadd_ps(a, col[j], acc[r][j]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < V; ++j) _mm256_storeu_ps(du + r * lddu + j * kLanes, acc[r][j]);
}

GemmTile gemm_add_tile_of(int rows, int vectors) {
  static const GemmTile tiles[kRows][kVectors] = {
      {gemm_add_tile<1, 1>, gemm_add_tile<1, 2>}, {gemm_add_tile<2, 1>, gemm_add_tile<2, 2>},
      {gemm_add_tile<3, 1>, gemm_add_tile<3, 2>}, {gemm_add_tile<4, 1>, gemm_add_tile<4, 2>},
      {gemm_add_tile<5, 1>, gemm_add_tile<5, 2>}, {gemm_add_tile<6, 1>, gemm_add_tile<6, 2>}};
  return tiles[rows - 1][vectors - 1];
}

// dw[o][i][a][b] = (G' du G)[a][b] for du[(xi * in8 + i) * out8 + o], 8 output channels a
// vector, for i < in and o < out.
PURINE_AVX2 void weight_gradient(const float* du, int64_t in, int64_t out, int64_t in8,
                                 int64_t out8, float* dw) {
  const __m256 half = _mm256_set1_ps(0.5f);
  for (int64_t i = 0; i < in; ++i) {
    for (int64_t o0 = 0; o0 < out; o0 += kLanes) {
      __m256 d[4][4];
      for (int xi = 0; xi < kPositions; ++xi)
        d[xi / 4][xi % 4] = _mm256_loadu_ps(du + (xi * in8 + i) * out8 + o0);
      __m256 t[3][4];  // G' du
      for (int s = 0; s < 4; ++s) {
        const __m256 mid = _mm256_mul_ps(half, _mm256_add_ps(d[1][s], d[2][s]));
        t[0][s] = _mm256_add_ps(d[0][s], mid);
        t[1][s] = _mm256_mul_ps(half, _mm256_sub_ps(d[1][s], d[2][s]));
        t[2][s] = _mm256_add_ps(mid, d[3][s]);
      }
      alignas(32) float taps[9][kLanes];
      for (int a = 0; a < 3; ++a) {
        const __m256 mid = _mm256_mul_ps(half, _mm256_add_ps(t[a][1], t[a][2]));
        _mm256_store_ps(taps[a * 3 + 0], _mm256_add_ps(t[a][0], mid));
        _mm256_store_ps(taps[a * 3 + 1], _mm256_mul_ps(half, _mm256_sub_ps(t[a][1], t[a][2])));
        _mm256_store_ps(taps[a * 3 + 2], _mm256_add_ps(mid, t[a][3]));
      }
      for (int64_t l = 0; l < std::min(kLanes, out - o0); ++l)
        for (int tap = 0; tap < 9; ++tap) dw[((o0 + l) * in + i) * 9 + tap] = taps[tap][l];
    }
  }
}

// The weight gradient: dU[xi] = the sum over the batch's tiles of V[xi]' (A dy A')[xi], then
// dw = G' dU G. The batch is cut into the fixed chunks of the other weight kernels, each summed
// on one thread tile by tile in order, and the chunks' sums added in order.
class WinogradWeightsKernel : public ConvKernel {
 public:
  WinogradWeightsKernel(const ConvGeometry& g, int threads, ConvBlocks blocks)
      : ConvKernel(ConvDirection::kBackwardWeights, g, threads, false, blocks),
        p_(problem_of(ConvDirection::kForward, g, {blocks.b, 0, blocks.a})),
        in8_(round_up(p_.in, kLanes)),
        out8_(round_up(p_.out, kLanes)),
        tile_h_((p_.out_h + 1) / 2),
        tile_w_((p_.out_w + 1) / 2),
        hp_(2 * tile_h_ + 2),
        wp_(2 * tile_w_ + 2),
        chunks_(std::min(g.n, kMaxChunks)),
        size_(kPositions * in8_ * out8_) {
    const int64_t image_tiles = tile_h_ * tile_w_;
    block_tiles_ =
        std::clamp<int64_t>(kWeightBlockBytes / (4 * kPositions * (in8_ + out8_)), 1, image_tiles);
    sum_at_ = workspace_.add(sizeof(float) * size_);
    x_at_ = per_thread_.add(sizeof(float) * in8_ * hp_ * wp_);
    dy_at_ = per_thread_.add(sizeof(float) * out8_ * 4 * image_tiles);
    v_at_ = per_thread_.add(sizeof(float) * kPositions * block_tiles_ * in8_);
    z_at_ = per_thread_.add(sizeof(float) * kPositions * block_tiles_ * out8_);
    threads_at_ = workspace_.add(per_thread_.bytes() * team_);
    partials_.resize(static_cast<size_t>(chunks_) * size_);
  }

  std::string name() const override { return "winograd:F(2x2,3x3)"; }

  void run(const float* dy, const float* x, const float*, float* dw) override {
    if (p_.n == 0) {
      std::fill(dw, dw + p_.out * p_.in * 9, 0.0f);
      return;
    }
    OmpThreads scope(team_);
    char* workspace = thread_workspace(workspace_.bytes());
    char* threads = workspace + threads_at_;
    parallel_region(team_ > 1, [&] {
      char* mine = threads + per_thread_.bytes() * (team_ > 1 ? omp_get_thread_num() : 0);
#pragma omp for schedule(static)
      for (int64_t chunk = 0; chunk < chunks_; ++chunk) {
        float* partial = partials_.data() + chunk * size_;
        std::fill(partial, partial + size_, 0.0f);
        for (int64_t n = chunk_begin(p_.n, chunk, chunks_);
             n < chunk_begin(p_.n, chunk + 1, chunks_); ++n)
          add_image(dy, x, n, partial, mine);
      }
    });
    float* sum = workspace_floats(workspace, sum_at_);
    sum_chunks(partials_.data(), chunks_, size_, sum);
    weight_gradient(sum, p_.in, p_.out, in8_, out8_, dw);
  }

 private:
  // partial += image n's share of dU.
  void add_image(const float* dy, const float* x, int64_t n, float* partial,
                 char* workspace) const {
    float* x_packed = workspace_floats(workspace, x_at_);
    float* dy_packed = workspace_floats(workspace, dy_at_);
    float* v = workspace_floats(workspace, v_at_);
    float* z = workspace_floats(workspace, z_at_);
    const int64_t oh = 2 * tile_h_, ow = 2 * tile_w_;
    pack_image(x, p_.in_block, n, p_.in, p_.in_h, p_.in_w, p_.pad_h, p_.pad_w, hp_, wp_, x_packed);
    pack_image(dy, p_.out_block, n, p_.out, p_.out_h, p_.out_w, 0, 0, oh, ow, dy_packed);
    const int64_t image_tiles = tile_h_ * tile_w_;
    for (int64_t first = 0; first < image_tiles; first += block_tiles_) {
      const int64_t tiles = std::min(block_tiles_, image_tiles - first);
      transform_inputs(x_packed, in8_ / kLanes, hp_, wp_, tile_w_, first, tiles, v, in8_);
      transform_output_grads(dy_packed, out8_ / kLanes, oh, ow, tile_w_, first, tiles, z, out8_);
      for (int64_t xi = 0; xi < kPositions; ++xi) {
        const float* vx = v + xi * tiles * in8_;
        const float* zx = z + xi * tiles * out8_;
        float* dux = partial + xi * in8_ * out8_;
        for (int64_t i = 0; i < in8_; i += kRows) {
          const int rows = static_cast<int>(std::min<int64_t>(kRows, in8_ - i));
          for (int64_t o = 0; o < out8_; o += kVectors * kLanes) {
            const int vectors = static_cast<int>(std::min<int64_t>(kVectors, (out8_ - o) / kLanes));
            gemm_add_tile_of(rows, vectors)(vx + i, in8_, zx + o, out8_, tiles, dux + i * out8_ + o,
                                            out8_);
          }
        }
      }
    }
  }

  const Problem p_;
  const int64_t in8_, out8_, tile_h_, tile_w_, hp_, wp_;
  const int64_t chunks_;  // fixed chunks of the batch
  const int64_t size_;    // floats of dU: 16 in8 out8
  int64_t block_tiles_;
  WorkspaceLayout workspace_;   // the chunks' sum, then per_thread_ for each thread
  WorkspaceLayout per_thread_;  // packed x and dy, V and Z of one image
  size_t sum_at_, threads_at_, x_at_, dy_at_, v_at_, z_at_;
  std::vector<float> partials_;  // one dU per chunk
};

}  // namespace

bool winograd_fit(ConvDirection direction, const ConvGeometry& g) {
  // Under an ONEDNN_MAX_CPU_ISA cap below AVX2 as on a CPU without it (vector_isa.hpp).
  static const bool avx2 = vector_isa() != VectorIsa::kBaseline && __builtin_cpu_supports("fma");
  (void)direction;
  return avx2 && g.kh == 3 && g.kw == 3 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h <= 2 &&
         g.pad_w <= 2;
}

std::unique_ptr<ConvKernel> make_winograd_kernel(ConvDirection direction, const ConvGeometry& g,
                                                 int threads, bool bias_relu, ConvBlocks blocks) {
  if (direction == ConvDirection::kBackwardWeights)
    return std::make_unique<WinogradWeightsKernel>(g, threads, blocks);
  return std::make_unique<WinogradKernel>(direction, g, threads, bias_relu, blocks);
}

}  // namespace purine
