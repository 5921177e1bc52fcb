// The weight gradient of a stride-1 convolution as dot products of shifted rows, with no im2col.
//
// dw[o][c][a][b] = the sum over images and output pixels (i, j) of dy[o][i][j] x[c][i + a][j + b],
// x zero-padded to Hp x Wp (Hp = H + 2 pad_h, Wp = W + 2 pad_w = Wo + kw - 1). Lay out each image's
// dy rows Wp apart (zeros at j >= Wo) and its padded x as Hp rows of Wp: then the pixel at k =
// i Wp + j of dy meets the x element k + a Wp + b, for every tap (a, b) at once. So dw[o][c][a][b]
// is the dot product of dy's row for o with x's row for c read from a Wp + b on: im2col's matrix
// of C kh kw rows exists without being written, each of its rows a pointer into the padded x
// (im2col writes kh kw copies of x, 9 for 3x3, and its GEMM packs them again). The dot products
// run in register tiles of 4 output channels by 3 taps, 8 pixels at a time (AVX2 FMA), over the
// images of a group sized to stay in L2, and each tile adds each image's sums into dw. The batch is
// cut into the fixed chunks of the other weight kernels, each summed on one thread, and the chunks'
// sums are added in order: the bits follow from the geometry alone, not the thread count. The
// zeros at j >= Wo cost (Wp - Wo) / Wo more multiply-adds (7% at 28x28 with 3x3 kernels); they
// meet x values of other taps, so an infinite x can make more of dw NaN than im2col would (dw is
// not finite then either way). dy and x may each be in channel blocks (Tensor::channel_block):
// the packing reads them as they are, turning each pixel row of a block into rows of its
// channels, so blocked arguments cost no reorder.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "operators/cpu/conv_kernel.hpp"
#include "operators/cpu/lane_tiles.hpp"
#include "operators/cpu/thread_workspace.hpp"
#include "operators/cpu/vector_isa.hpp"

namespace purine {

namespace {

// A group of images keeps its padded dy and x under this many bytes (L2).
constexpr int64_t kGroupBytes = int64_t{512} << 10;

__attribute__((target("avx2,fma"))) inline float horizontal_sum(__m256 v) {
  __m128 sum = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
  sum = _mm_add_ss(sum, _mm_shuffle_ps(sum, sum, 1));
  return _mm_cvtss_f32(sum);
}

// out[r][t] += the sum over k < len (a multiple of 8) of a[r][n a_step + k] b[t][n b_step + k],
// image n by image n for n < images: each image's dot products are summed alone and added in
// image order, so an image's share of dw does not depend on which images share its chunk or
// group (two replicas of half the batch then follow one replica closely, as with im2col's
// per-image GEMMs).
template <int M, int T>
__attribute__((target("avx2,fma"))) void dot_tile(const float* const* a, const float* const* b,
                                                  int64_t images, int64_t len, int64_t a_step,
                                                  int64_t b_step, float* out, int64_t ld_out) {
  for (int64_t n = 0; n < images; ++n) {
    const int64_t a_at = n * a_step, b_at = n * b_step;
    __m256 acc[M][T];
    for (int r = 0; r < M; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    for (int64_t k = 0; k < len; k += 8) {
      __m256 bv[T];
      for (int t = 0; t < T; ++t) bv[t] = _mm256_loadu_ps(b[t] + b_at + k);
      for (int r = 0; r < M; ++r) {
        const __m256 av = _mm256_loadu_ps(a[r] + a_at + k);
        for (int t = 0; t < T; ++t) acc[r][t] = _mm256_fmadd_ps(av, bv[t], acc[r][t]);
      }
    }
    for (int r = 0; r < M; ++r)
      for (int t = 0; t < T; ++t) out[r * ld_out + t] += horizontal_sum(acc[r][t]);
  }
}

// rows[l * stride + q] = pixels[q * block + l] for q < count and l < block (a multiple of 8): a
// row of `count` pixels of one channel block written as a row of each of its channels.
__attribute__((target("avx2"))) void unblock_row(const float* pixels, int64_t block, int64_t count,
                                                 float* rows, int64_t stride) {
  for (int64_t l = 0; l < block; l += 8)
    LaneTiles<8>::from_rows_apart(pixels + l, block, count, 8, rows + l * stride, stride);
}

// Rows of `width` pixels, `height` of them per channel, of `channels` channels of one image at
// `from` (plain, or in blocks of `block` channels) copied to `to`: channel c's row i to
// to + c * ld + i * wp.
void copy_rows(const float* from, int block, int64_t channels, int64_t height, int64_t width,
               float* to, int64_t ld, int64_t wp) {
  if (block == 0) {
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < height; ++i)
        std::memcpy(to + c * ld + i * wp, from + (c * height + i) * width, 4 * width);
    return;
  }
  for (int64_t c = 0; c < channels; c += block)
    for (int64_t i = 0; i < height; ++i)
      unblock_row(from + c * height * width + i * width * block, block, width, to + c * ld + i * wp,
                  ld);
}

using DotTile = void (*)(const float* const*, const float* const*, int64_t, int64_t, int64_t,
                         int64_t, float*, int64_t);

// dot_tile<M, T> for 1 <= M <= 4 and 1 <= T <= 3.
DotTile dot_tile_of(int m, int t) {
  static const DotTile tiles[4][3] = {
      {dot_tile<1, 1>, dot_tile<1, 2>, dot_tile<1, 3>},
      {dot_tile<2, 1>, dot_tile<2, 2>, dot_tile<2, 3>},
      {dot_tile<3, 1>, dot_tile<3, 2>, dot_tile<3, 3>},
      {dot_tile<4, 1>, dot_tile<4, 2>, dot_tile<4, 3>},
  };
  return tiles[m - 1][t - 1];
}

class ShiftedRowsKernel : public ConvKernel {
 public:
  ShiftedRowsKernel(const ConvGeometry& g, int threads, ConvBlocks blocks)
      : ConvKernel(ConvDirection::kBackwardWeights, g, threads, false, blocks),
        wp_(g.w + 2 * g.pad_w),
        x_image_((g.h + 2 * g.pad_h) * wp_),
        dy_image_((g.ho * wp_ + 7) / 8 * 8),
        // The last image's rows are read up to (kh - 1) Wp + kw - 1 past its dy length.
        x_tail_(std::max<int64_t>(0, dy_image_ + (g.kh - 1) * wp_ + g.kw - x_image_) + 8),
        chunks_(std::min(g.n, kMaxChunks)),
        group_(std::clamp<int64_t>(
            kGroupBytes / (4 * (g.o * dy_image_ + g.c * x_image_)), 1,
            std::max<int64_t>(1, (g.n + chunks_ - 1) / std::max<int64_t>(1, chunks_)))),
        taps_(g.c * g.kh * g.kw),
        dy_rows_at_(workspace_.add(sizeof(float) * team_ * g.o * group_ * dy_image_)),
        x_rows_at_(workspace_.add(sizeof(float) * team_ * g.c * (group_ * x_image_ + x_tail_))),
        partials_at_(workspace_.add(sizeof(float) * chunks_ * g.o * taps_)) {}

  std::string name() const override { return "im2col:shifted rows"; }

  void run(const float* dy, const float* x, const float*, float* dw) override {
    const ConvGeometry& g = g_;
    const int64_t size = g.o * taps_;
    if (g.n == 0) {
      std::fill(dw, dw + size, 0.0f);
      return;
    }
    OmpThreads scope(team_);
    char* workspace = thread_workspace(workspace_.bytes());
    dy_rows_ = workspace_floats(workspace, dy_rows_at_);
    x_rows_ = workspace_floats(workspace, x_rows_at_);
    float* partials = workspace_floats(workspace, partials_at_);
#pragma omp parallel for schedule(static) num_threads(team_)
    for (int64_t chunk = 0; chunk < chunks_; ++chunk) {
      float* partial = partials + chunk * size;
      std::fill(partial, partial + size, 0.0f);
      const int64_t end = chunk_begin(g.n, chunk + 1, chunks_);
      for (int64_t first = chunk_begin(g.n, chunk, chunks_); first < end; first += group_)
        add_group(dy, x, first, std::min(group_, end - first), partial);
    }
    sum_chunks(partials, chunks_, size, dw);
  }

 private:
  // partial += the group of `images` images from `first` on, in the thread's buffers.
  void add_group(const float* dy, const float* x, int64_t first, int64_t images, float* partial) {
    const ConvGeometry& g = g_;
    const int t = omp_get_thread_num();
    const int64_t dy_ld = group_ * dy_image_, x_ld = group_ * x_image_ + x_tail_;
    float* dy_rows = dy_rows_ + static_cast<size_t>(t) * g.o * dy_ld;
    float* x_rows = x_rows_ + static_cast<size_t>(t) * g.c * x_ld;
    std::fill(dy_rows, dy_rows + g.o * dy_ld, 0.0f);
    std::fill(x_rows, x_rows + g.c * x_ld, 0.0f);
    for (int64_t n = 0; n < images; ++n) {
      copy_rows(dy + (first + n) * g.o * g.ho * g.wo, blocks_.a, g.o, g.ho, g.wo,
                dy_rows + n * dy_image_, dy_ld, wp_);
      copy_rows(x + (first + n) * g.c * g.h * g.w, blocks_.b, g.c, g.h, g.w,
                x_rows + n * x_image_ + g.pad_h * wp_ + g.pad_w, x_ld, wp_);
    }
    const int64_t kk = g.kh * g.kw;
    for (int64_t o = 0; o < g.o; o += 4) {
      const int m = static_cast<int>(std::min<int64_t>(4, g.o - o));
      const float* a[4];
      for (int r = 0; r < m; ++r) a[r] = dy_rows + (o + r) * dy_ld;
      for (int64_t tap = 0; tap < taps_; tap += 3) {
        const int count = static_cast<int>(std::min<int64_t>(3, taps_ - tap));
        const float* b[3];
        for (int s = 0; s < count; ++s) {
          const int64_t c = (tap + s) / kk, ki = (tap + s) / g.kw % g.kh, kj = (tap + s) % g.kw;
          b[s] = x_rows + c * x_ld + ki * wp_ + kj;
        }
        dot_tile_of(m, count)(a, b, images, dy_image_, dy_image_, x_image_,
                              partial + o * taps_ + tap, taps_);
      }
    }
  }

  const int64_t wp_;        // padded row width, W + 2 pad_w
  const int64_t x_image_;   // an image's padded x rows of one channel: Hp Wp floats
  const int64_t dy_image_;  // an image's dy rows of one channel: Ho Wp floats, to a multiple of 8
  const int64_t x_tail_;    // zeros after a group's x rows that its last image's taps may read
  const int64_t chunks_;    // fixed chunks of the batch
  const int64_t group_;     // images packed and summed at once
  const int64_t taps_;      // C kh kw
  WorkspaceLayout workspace_;
  const size_t dy_rows_at_;   // per thread: [O, group dy images]
  const size_t x_rows_at_;    // per thread: [C, group x images + tail]
  const size_t partials_at_;  // one [O, C kh kw] sum per chunk
  float* dy_rows_ = nullptr;  // the two in the workspace of the thread that runs the kernel
  float* x_rows_ = nullptr;
};

}  // namespace

bool shifted_rows_fit(const ConvGeometry& g) {
  // Under an ONEDNN_MAX_CPU_ISA cap below AVX2 as on a CPU without it (vector_isa.hpp).
  return avx2_fma_kernels_run() && g.stride_h == 1 && g.stride_w == 1;
}

std::unique_ptr<ConvKernel> make_shifted_rows_kernel(const ConvGeometry& g, int threads,
                                                     ConvBlocks blocks) {
  return std::make_unique<ShiftedRowsKernel>(g, threads, blocks);
}

}  // namespace purine
