// 3x3 and 5x5 stride-1 convolutions by Winograd's minimal filtering F(m x m, r x r): F(4x4, 3x3),
// F(2x2, 3x3) and F(2x2, 5x5) (Lavin and Gray, "Fast Algorithms for Convolutional Neural
// Networks", 2015). Each m x m tile of output pixels is computed from the alpha x alpha input tile
// under it (alpha = m + r - 1: 6, 4 or 6) as alpha^2 products of transformed values, where the
// direct convolution multiplies 144, 36 or 100 times. Per tile and per pair of channels:
//   V = B' d B (input tile d),  U = G g G' (kernel g, r x r -> alpha x alpha),  y = A' (U . V) A.
// Summed over input channels, the elementwise products become alpha^2 GEMMs, one per position xi
// of the tile: M[xi][tile][out] = sum over in of V[xi][tile][in] U[xi][in][out], 4x, 2.25x or
// 2.78x fewer multiply-adds than the direct convolution, in register tiles of 6 rows by 16
// columns (AVX2 FMA). F(4x4, 3x3) takes the 3x3 forwards and data gradients but over planes of 1
// or 2 pixels a side, and the weight gradients of few channels (output_tile). The data gradient is
// the same convolution of dy with the kernels turned by 180 degrees, inputs and outputs exchanged,
// and pad r - 1 - pad. The weight gradient runs the chain backwards: dU[xi] = the sum over all
// tiles of V[xi]' (A dy A')[xi], then dw = G' dU G.
//
// Each image is packed into a zero-padded buffer in groups of 8 channels (one vector per pixel),
// from plain order or from channel blocks of 8 or 16 as they are; its tiles are transformed,
// multiplied and transformed back in blocks whose transformed values stay in L1 (forward, data
// gradient) or L2 (weight gradient, whose products accumulate over the tiles), blocks that span
// images where a plane has fewer tiles than a block; and the output is
// unpacked into its layout (bias and ReLU added there for conv_bias_relu, after the whole sum, as
// the separate ops round). Every output pixel is summed by one thread in a fixed order, and the
// weight gradient over the fixed batch chunks of the other weight kernels, each on one thread,
// added in order: the bits depend on the geometry alone, not on the thread count or the layouts.
// They are not the direct convolution's: the transforms add and scale in other orders (F(2x2, 3x3):
// errors of a few units in the last place of the sum's largest terms; the 6x6 tiles, whose
// transforms multiply by up to 5 and 8 and cancel: about 1e-5 of the sums' size), and an infinite
// input can turn more of the output NaN than it would. The vector steps are in winograd_steps.cpp
// and winograd_6x6.cpp.
#include <algorithm>
#include <string>

#include "operators/cpu/conv_kernel.hpp"
#include "operators/cpu/thread_workspace.hpp"
#include "operators/cpu/vector_isa.hpp"
#include "operators/cpu/winograd_steps.hpp"

namespace purine {

namespace {

using namespace winograd;

// A block of tiles keeps its transformed inputs and products (V and M) under this many bytes
// (L1); in the weight gradient, whose products accumulate over the tiles, V and A dy A' (half of
// a 512 KB L2, beside dU and the packed images; 128 to 512 KB measured alike).
constexpr int64_t kBlockBytes = int64_t{24} << 10;
constexpr int64_t kWeightBlockBytes = int64_t{256} << 10;

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Floats from one position's transformed values to the next's, for `tiles` tiles of `ld`
// channels: one cache line more than they fill, so that the 16 positions' rows do not all fall
// into the same L1 sets when tiles * ld is a multiple of 4 KB (256 tiles of 16 channels made the
// weight gradient's transforms 2x slower).
int64_t position_step(int64_t tiles, int64_t ld) { return tiles * ld + 16; }

// The convolution the kernel runs (the data gradient's is the forward of dy): `in` channels of
// in_h x in_w to `out` channels of out_h x out_w, r x r taps, stride 1.
struct Problem {
  int64_t m, r;  // output tile size, 2 or 4, and kernel size, 3 or 5
  int64_t n, in, in_h, in_w, out, out_h, out_w, pad_h, pad_w;
  int in_block, out_block;  // channel blocks of the input and output tensors (0: plain)
  TapStrides taps;
};

// The convolution that `direction` of `g` runs (the weight gradient's: the forward's).
Problem problem_of(ConvDirection direction, const ConvGeometry& g, ConvBlocks blocks, int64_t m) {
  Problem p;
  p.m = m;
  p.r = g.kh;
  const int64_t taps = p.r * p.r;
  p.n = g.n;
  p.out_block = blocks.out;
  p.in_block = blocks.a;
  if (direction == ConvDirection::kForward) {
    p.in = g.c, p.in_h = g.h, p.in_w = g.w, p.out = g.o, p.out_h = g.ho, p.out_w = g.wo;
    p.pad_h = g.pad_h, p.pad_w = g.pad_w;
    p.taps = {0, g.c * taps, taps, p.r, 1};
  } else {  // dx = the forward of dy with the kernels turned and transposed
    p.in = g.o, p.in_h = g.ho, p.in_w = g.wo, p.out = g.c, p.out_h = g.h, p.out_w = g.w;
    p.pad_h = p.r - 1 - g.pad_h, p.pad_w = p.r - 1 - g.pad_w;
    p.taps = {taps - 1, taps, g.c * taps, -p.r, -1};
  }
  return p;
}

// "winograd:F(2x2,3x3)", "winograd:F(4x4,3x3)" or "winograd:F(2x2,5x5)".
std::string kernel_name(const Problem& p) {
  const auto square = [](int64_t k) { return std::to_string(k) + "x" + std::to_string(k); };
  return "winograd:F(" + square(p.m) + "," + square(p.r) + ")";
}

const Transforms& transforms_of(const Problem& p) {
  if (p.r == 5) return transforms_2x2_5x5();
  return p.m == 4 ? transforms_4x4_3x3() : transforms_2x2_3x3();
}

// The weight gradient's dU, 36 positions of in8 x out8 sums with 4x4 tiles, is loaded and
// stored once per block of tiles: 4x4 tiles only where a block of kWeightBlockBytes holds this
// many tiles or more (16 input and 16 output channels: 56 tiles, 27-31% faster than 2x2 ones
// over 28x28 planes; level at 28 and 14 tiles, 15-25% slower at 7).
constexpr int64_t kWeightTilesFor4x4 = 48;

// F(4x4, 3x3) for a 3x3 convolution where its padded tiles take fewer products than F(2x2, 3x3)'s
// (every plane but those of 1 or 2 pixels a side), a weight gradient only with few channels
// (kWeightTilesFor4x4); F(2x2, r x r) otherwise.
int64_t output_tile(ConvDirection direction, const ConvGeometry& g) {
  if (g.kh != 3) return 2;
  if (direction == ConvDirection::kBackwardWeights &&
      kWeightBlockBytes / (4 * 36 * (round_up(g.c, kLanes) + round_up(g.o, kLanes))) <
          kWeightTilesFor4x4)
    return 2;
  // The output plane (the data gradient's is the input's) in tiles of 2x2 and 4x4, padded.
  const int64_t h = direction == ConvDirection::kBackwardData ? g.h : g.ho;
  const int64_t w = direction == ConvDirection::kBackwardData ? g.w : g.wo;
  const auto products = [&](int64_t m, int64_t alpha) {
    return (h + m - 1) / m * ((w + m - 1) / m) * alpha * alpha;
  };
  return products(4, 6) < products(2, 4) ? 4 : 2;
}

// How a problem's images are tiled and packed.
struct Tiling {
  explicit Tiling(const Problem& p)
      : f(transforms_of(p)),
        positions(f.alpha * f.alpha),
        in8(round_up(p.in, kLanes)),
        out8(round_up(p.out, kLanes)),
        tile_h((p.out_h + p.m - 1) / p.m),
        tile_w((p.out_w + p.m - 1) / p.m),
        hp(p.m * tile_h + p.r - 1),
        wp(p.m * tile_w + p.r - 1) {}
  int64_t tiles() const { return tile_h * tile_w; }  // of one image
  // Tiles per block: a multiple of `multiple` whose transformed inputs and outputs (`positions`
  // times in8 and out8 floats a tile) stay under `bytes`, at least `multiple`, at most `most`.
  int64_t block(int64_t bytes, int64_t multiple, int64_t most) const {
    const int64_t fit = bytes / (4 * positions * (in8 + out8)) / multiple;
    return std::min(most, std::max<int64_t>(1, fit) * multiple);
  }
  const Transforms& f;
  int64_t positions;       // of the transformed tile: alpha^2
  int64_t in8, out8;       // channels rounded up to groups of 8
  int64_t tile_h, tile_w;  // output tiles per column and row
  int64_t hp, wp;          // the packed input's padded height and width
};

// fn(image, tile, done, count) for each run of the tiles [block, block + tiles) of a stretch of
// images (image_tiles tiles each) that lies in one image: `count` tiles from tile `tile` of
// `image`, the block's `done`th on.
template <class Fn>
void each_image_run(int64_t block, int64_t tiles, int64_t image_tiles, Fn fn) {
  for (int64_t done = 0; done < tiles;) {
    const int64_t image = (block + done) / image_tiles, tile = (block + done) % image_tiles;
    const int64_t count = std::min(tiles - done, image_tiles - tile);
    fn(image, tile, done, count);
    done += count;
  }
}

class WinogradKernel : public ConvKernel {
 public:
  WinogradKernel(ConvDirection direction, const ConvGeometry& g, int threads, bool bias_relu,
                 ConvBlocks blocks, int64_t m)
      : ConvKernel(direction, g, threads, bias_relu, blocks),
        p_(problem_of(direction, g, blocks, m)),
        t_(p_),
        // Small planes are taken a few images at a time, so that a block has rows enough for
        // the register tiles (a 4x4 plane is a single tile of F(4x4, 3x3)).
        images_(std::clamp<int64_t>(
            (t_.block(kBlockBytes, kRows, p_.n * t_.tiles()) + t_.tiles() - 1) / t_.tiles(), 1,
            std::max<int64_t>(1, p_.n))),
        block_tiles_(t_.block(kBlockBytes, kRows, images_ * t_.tiles())) {
    u_at_ = workspace_.add(sizeof(float) * t_.positions * t_.in8 * t_.out8);
    packed_at_ = per_thread_.add(sizeof(float) * images_ * packed_size());
    v_at_ = per_thread_.add(sizeof(float) * t_.positions * position_step(block_tiles_, t_.in8));
    m_at_ = per_thread_.add(sizeof(float) * t_.positions * position_step(block_tiles_, t_.out8));
    out_at_ = per_thread_.add(sizeof(float) * images_ * output_size());
    threads_at_ = workspace_.add(per_thread_.bytes() * team_);
  }

  std::string name() const override { return kernel_name(p_); }

  void run(const float* a, const float* w, const float* bias, float* out) override {
    OmpThreads scope(team_);
    char* workspace = thread_workspace(workspace_.bytes());
    float* u = workspace_floats(workspace, u_at_);
    char* threads = workspace + threads_at_;
    parallel_region(team_ > 1, [&] {
#pragma omp for schedule(static)
      for (int64_t i = 0; i < t_.in8; ++i)
        t_.f.kernels(w, p_.taps, p_.in, p_.out, t_.in8, t_.out8, i, i + 1, u);
      // Images go to whichever thread is free: one whose core is shared or stolen (a virtual
      // machine's) would otherwise hold the others up. Each image's outputs are its own, so
      // the bits do not depend on the schedule.
      char* mine = threads + per_thread_.bytes() * (team_ > 1 ? omp_get_thread_num() : 0);
#pragma omp for schedule(dynamic)
      for (int64_t n = 0; n < p_.n; n += images_)
        run_images(a, u, bias, n, std::min(images_, p_.n - n), out, mine);
    });
  }

 private:
  int64_t packed_size() const { return t_.in8 * t_.hp * t_.wp; }
  int64_t output_size() const { return t_.out8 * t_.f.m * t_.tile_h * t_.f.m * t_.tile_w; }

  // The images [first, first + count): packed, their tiles transformed, multiplied and
  // transformed back in blocks that may span images, and unpacked.
  void run_images(const float* in, const float* u, const float* bias, int64_t first, int64_t count,
                  float* out, char* workspace) const {
    float* packed = workspace_floats(workspace, packed_at_);
    float* v = workspace_floats(workspace, v_at_);
    float* m = workspace_floats(workspace, m_at_);
    float* outputs = workspace_floats(workspace, out_at_);
    for (int64_t k = 0; k < count; ++k)
      pack_image(in, p_.in_block, first + k, p_.in, p_.in_h, p_.in_w, p_.pad_h, p_.pad_w, t_.hp,
                 t_.wp, packed + k * packed_size());
    const int64_t in8 = t_.in8, out8 = t_.out8, oh = t_.f.m * t_.tile_h, ow = t_.f.m * t_.tile_w;
    const int64_t all = count * t_.tiles();
    for (int64_t block = 0; block < all; block += block_tiles_) {
      const int64_t tiles = std::min(block_tiles_, all - block);
      const int64_t in_step = position_step(tiles, in8), out_step = position_step(tiles, out8);
      each_image_run(block, tiles, t_.tiles(),
                     [&](int64_t k, int64_t tile, int64_t done, int64_t run) {
                       t_.f.inputs(packed + k * packed_size(), in8 / kLanes, t_.hp, t_.wp,
                                   t_.tile_w, tile, run, v + done * in8, in8, in_step);
                     });
      for (int64_t xi = 0; xi < t_.positions; ++xi) {
        const float* vx = v + xi * in_step;
        const float* ux = u + xi * in8 * out8;
        float* mx = m + xi * out_step;
        for (int64_t o = 0; o < out8; o += kVectors * kLanes) {
          const int vectors = static_cast<int>(std::min<int64_t>(kVectors, (out8 - o) / kLanes));
          for (int64_t t = 0; t < tiles; t += kRows) {
            const int rows = static_cast<int>(std::min<int64_t>(kRows, tiles - t));
            gemm_tile_of(rows, vectors)(vx + t * in8, in8, ux + o, out8, in8, mx + t * out8 + o,
                                        out8);
          }
        }
      }
      each_image_run(block, tiles, t_.tiles(),
                     [&](int64_t k, int64_t tile, int64_t done, int64_t run) {
                       t_.f.outputs(m + done * out8, out8, out_step, run, tile, t_.tile_w,
                                    out8 / kLanes, oh, ow, outputs + k * output_size());
                     });
    }
    for (int64_t k = 0; k < count; ++k)
      unpack_image(outputs + k * output_size(), oh, ow, p_.out, p_.out_h, p_.out_w,
                   bias_relu_ ? bias : nullptr, p_.out_block, first + k, out);
  }

  const Problem p_;
  const Tiling t_;
  const int64_t images_;        // images taken at once
  const int64_t block_tiles_;   // tiles transformed and multiplied at once
  WorkspaceLayout workspace_;   // the transformed weights, then per_thread_ for each thread
  WorkspaceLayout per_thread_;  // packed inputs, V, M and the packed outputs of images_ images
  size_t u_at_, threads_at_, packed_at_, v_at_, m_at_, out_at_;
};

// The weight gradient: dU[xi] = the sum over the batch's tiles of V[xi]' (A dy A')[xi], then
// dw = G' dU G. The batch is cut into the fixed chunks of the other weight kernels, each summed
// on one thread tile by tile in order, and the chunks' sums added in order.
class WinogradWeightsKernel : public ConvKernel {
 public:
  WinogradWeightsKernel(const ConvGeometry& g, int threads, ConvBlocks blocks, int64_t m)
      : ConvKernel(ConvDirection::kBackwardWeights, g, threads, false, blocks),
        p_(problem_of(ConvDirection::kForward, g, {blocks.b, 0, blocks.a}, m)),
        t_(p_),
        chunks_(std::min(g.n, kMaxChunks)),
        size_(t_.positions * t_.in8 * t_.out8),
        // A block may span the images of a chunk.
        block_tiles_(
            t_.block(kWeightBlockBytes, 1,
                     std::max<int64_t>(1, (g.n + chunks_ - 1) / std::max<int64_t>(1, chunks_)) *
                         t_.tiles())) {
    sum_at_ = workspace_.add(sizeof(float) * size_);
    partials_at_ = workspace_.add(sizeof(float) * chunks_ * size_);
    x_at_ = per_thread_.add(sizeof(float) * t_.in8 * t_.hp * t_.wp);
    dy_at_ = per_thread_.add(sizeof(float) * t_.out8 * t_.f.m * t_.f.m * t_.tiles());
    v_at_ = per_thread_.add(sizeof(float) * t_.positions * position_step(block_tiles_, t_.in8));
    z_at_ = per_thread_.add(sizeof(float) * t_.positions * position_step(block_tiles_, t_.out8));
    threads_at_ = workspace_.add(per_thread_.bytes() * team_);
  }

  std::string name() const override { return kernel_name(p_); }

  void run(const float* dy, const float* x, const float*, float* dw) override {
    if (p_.n == 0) {
      std::fill(dw, dw + p_.out * p_.in * p_.r * p_.r, 0.0f);
      return;
    }
    OmpThreads scope(team_);
    char* workspace = thread_workspace(workspace_.bytes());
    char* threads = workspace + threads_at_;
    float* partials = workspace_floats(workspace, partials_at_);
    parallel_region(team_ > 1, [&] {
      char* mine = threads + per_thread_.bytes() * (team_ > 1 ? omp_get_thread_num() : 0);
#pragma omp for schedule(dynamic)  // as the forward's images; each chunk has its own sum
      for (int64_t chunk = 0; chunk < chunks_; ++chunk) {
        float* partial = partials + chunk * size_;
        std::fill(partial, partial + size_, 0.0f);
        const int64_t first = chunk_begin(p_.n, chunk, chunks_);
        add_images(dy, x, first, chunk_begin(p_.n, chunk + 1, chunks_) - first, partial, mine);
      }
    });
    float* sum = workspace_floats(workspace, sum_at_);
    sum_chunks(partials, chunks_, size_, sum);
    parallel_region(team_ > 1, [&] {
#pragma omp for schedule(static)
      for (int64_t i = 0; i < p_.in; ++i)
        t_.f.kernel_gradient(sum, p_.in, p_.out, t_.in8, t_.out8, i, i + 1, dw);
    });
  }

 private:
  // partial += the share of dU of `images` images from `first` on: their tiles in blocks that
  // may span images, each block's products added in tile order.
  void add_images(const float* dy, const float* x, int64_t first, int64_t images, float* partial,
                  char* workspace) const {
    float* x_packed = workspace_floats(workspace, x_at_);
    float* dy_packed = workspace_floats(workspace, dy_at_);
    float* v = workspace_floats(workspace, v_at_);
    float* z = workspace_floats(workspace, z_at_);
    const int64_t in8 = t_.in8, out8 = t_.out8, oh = t_.f.m * t_.tile_h, ow = t_.f.m * t_.tile_w;
    const int64_t image_tiles = t_.tiles(), all = images * image_tiles;
    int64_t packed = -1;  // the image in x_packed and dy_packed
    for (int64_t block = 0; block < all; block += block_tiles_) {
      const int64_t tiles = std::min(block_tiles_, all - block);
      each_image_run(
          block, tiles, image_tiles, [&](int64_t image, int64_t tile, int64_t done, int64_t count) {
            if (image != packed) {
              const int64_t n = first + image;
              pack_image(x, p_.in_block, n, p_.in, p_.in_h, p_.in_w, p_.pad_h, p_.pad_w, t_.hp,
                         t_.wp, x_packed);
              pack_image(dy, p_.out_block, n, p_.out, p_.out_h, p_.out_w, 0, 0, oh, ow, dy_packed);
              packed = image;
            }
            t_.f.inputs(x_packed, in8 / kLanes, t_.hp, t_.wp, t_.tile_w, tile, count,
                        v + done * in8, in8, position_step(tiles, in8));
            t_.f.output_grads(dy_packed, out8 / kLanes, oh, ow, t_.tile_w, tile, count,
                              z + done * out8, out8, position_step(tiles, out8));
          });
      for (int64_t xi = 0; xi < t_.positions; ++xi) {
        const float* vx = v + xi * position_step(tiles, in8);
        const float* zx = z + xi * position_step(tiles, out8);
        float* dux = partial + xi * in8 * out8;
        for (int64_t i = 0; i < in8; i += kRows) {
          const int rows = static_cast<int>(std::min<int64_t>(kRows, in8 - i));
          for (int64_t o = 0; o < out8; o += kVectors * kLanes) {
            const int vectors = static_cast<int>(std::min<int64_t>(kVectors, (out8 - o) / kLanes));
            gemm_add_tile_of(rows, vectors)(vx + i, in8, zx + o, out8, tiles, dux + i * out8 + o,
                                            out8);
          }
        }
      }
    }
  }

  const Problem p_;
  const Tiling t_;
  const int64_t chunks_;        // fixed chunks of the batch
  const int64_t size_;          // floats of dU: positions in8 out8
  const int64_t block_tiles_;   // tiles transformed and multiplied at once
  WorkspaceLayout workspace_;   // dU's sum, one dU per chunk, then per_thread_ for each thread
  WorkspaceLayout per_thread_;  // packed x and dy of one image, V and Z of one block
  size_t sum_at_, partials_at_, threads_at_, x_at_, dy_at_, v_at_, z_at_;
};

}  // namespace

bool winograd_fit(const ConvGeometry& g) {
  // Under an ONEDNN_MAX_CPU_ISA cap below AVX2 as on a CPU without it (vector_isa.hpp).
  return avx2_fma_kernels_run() && g.kh == g.kw && (g.kh == 3 || g.kh == 5) && g.stride_h == 1 &&
         g.stride_w == 1 && g.pad_h < g.kh && g.pad_w < g.kw;
}

int64_t winograd_transformed_weight_bytes(ConvDirection direction, const ConvGeometry& g) {
  const int64_t alpha = output_tile(direction, g) + g.kh - 1;
  return int64_t{4} * alpha * alpha * round_up(g.c, kLanes) * round_up(g.o, kLanes);
}

std::unique_ptr<ConvKernel> make_winograd_kernel(ConvDirection direction, const ConvGeometry& g,
                                                 int threads, bool bias_relu, ConvBlocks blocks) {
  const int64_t m = output_tile(direction, g);
  if (direction == ConvDirection::kBackwardWeights)
    return std::make_unique<WinogradWeightsKernel>(g, threads, blocks, m);
  return std::make_unique<WinogradKernel>(direction, g, threads, bias_relu, blocks, m);
}

}  // namespace purine
