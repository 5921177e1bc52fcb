// Convolutions of small output planes as GEMMs over groups of images: the weight gradient, and
// the forward of planes of 2x2 or smaller.
//
// dw [O, C kh kw] = the sum over images of dy_i [O, Ho Wo] times columns_i^T. Image by image
// (im2col's kernel) each GEMM's inner dimension is Ho Wo: 1 to 16 products per element in
// GoogLeNet's last inceptions at 28x28, so the GEMMs do little but load and store dw, and
// oneDNN's chunks of the batch spend their time adding partial sums of dw. Here a group of
// images has its columns side by side ([C kh kw, G Ho Wo]) and its dy gathered to [O, G Ho Wo],
// so one GEMM sums G Ho Wo products per element. Each fixed tile of dw is one GEMM on one thread,
// and the groups add into it in order: tiles and groups follow from the geometry alone, so the
// bits do not depend on the thread count. The forward is w [O, C kh kw] times the group's
// columns, [O, G Ho Wo] in fixed tiles, copied out image by image: one GEMM of G Ho Wo columns
// where image by image each has Ho Wo (a matrix-vector product for 1x1 planes).
#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "operators/cpu/conv_kernel.hpp"
#include "operators/cpu/thread_workspace.hpp"

namespace purine {

namespace {

// A group of images holds at most kGroupColumnFloats column floats (4 MB) and kGroupInner
// pixels of output plane (the GEMMs' inner dimension: with whole batches in one GEMM, 12,544 and
// 25,088 products per element for conv1 of convnet_bn at batch 16 and 32, two replicas of 16
// drifted from one of 32 by 3e-5 in 12 iterations; by 1e-7 with this bound, as image by image).
constexpr int64_t kGroupColumnFloats = int64_t{1} << 20;
constexpr int64_t kGroupInner = 4096;
// A GEMM computes a tile of its output (dw, or the forward's [O, group plane]) of at most kTileO
// output channels by tile_columns() columns.
constexpr int64_t kTileO = 64;
// Output rows at least this wide are copied row by row, image by image; narrower ones position
// by position for all the images of a group at once.
constexpr int64_t kWideRow = 8;

// Columns of a tile of an [o, columns] output: about 8 tiles in all where the output is large
// enough (work for every thread of a team of up to 8), in multiples of 16, at least 64.
int64_t tile_columns(int64_t o, int64_t columns) {
  const int64_t tiles_o = (o + kTileO - 1) / kTileO;
  const int64_t tiles_across = std::max<int64_t>(1, (8 + tiles_o - 1) / tiles_o);
  const int64_t tile = ((columns + tiles_across - 1) / tiles_across + 15) / 16 * 16;
  return std::min(columns, std::max<int64_t>(64, tile));
}

// Row r of the columns of `images` images x [images, C, H, W] side by side (image i's [Ho Wo]
// at column i Ho Wo). For narrow output rows, where im2col's work per row would dominate: each
// position's input offset is found once for all the images.
void im2col_row_of_images(const ConvGeometry& g, const float* x, int64_t images, int64_t r,
                          float* row) {
  const int64_t c = r / (g.kh * g.kw), ki = r / g.kw % g.kh, kj = r % g.kw;
  const int64_t image = g.c * g.h * g.w, plane = g.ho * g.wo;
  for (int64_t oh = 0; oh < g.ho; ++oh) {
    const int64_t ih = oh * g.stride_h - g.pad_h + ki;
    for (int64_t ow = 0; ow < g.wo; ++ow) {
      const int64_t iw = ow * g.stride_w - g.pad_w + kj;
      float* out = row + oh * g.wo + ow;
      if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) {
        for (int64_t i = 0; i < images; ++i) out[i * plane] = 0.0f;
      } else {
        const float* in = x + (c * g.h + ih) * g.w + iw;
        for (int64_t i = 0; i < images; ++i) out[i * plane] = in[i * image];
      }
    }
  }
}

class ImageGroupKernel : public ConvKernel {
 public:
  ImageGroupKernel(ConvDirection direction, const ConvGeometry& g, int threads, bool bias_relu)
      : ConvKernel(direction, g, threads, bias_relu),
        rows_(g.c * g.kh * g.kw),
        plane_(g.ho * g.wo),
        group_(
            std::clamp<int64_t>(std::min(kGroupColumnFloats / std::max<int64_t>(1, rows_ * plane_),
                                         kGroupInner / std::max<int64_t>(1, plane_)),
                                1, std::max<int64_t>(1, g.n))),
        tile_o_(std::min(g.o, kTileO)),
        tile_columns_(direction == ConvDirection::kForward ? tile_columns(g.o, group_ * plane_)
                                                           : tile_columns(g.o, rows_)),
        pointwise_(g.kh == 1 && g.kw == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h == 0 &&
                   g.pad_w == 0),
        columns_at_(workspace_.add(sizeof(float) * group_ * rows_ * plane_)),
        by_channel_at_(workspace_.add(sizeof(float) * group_ * g.o * plane_)) {
    CHECK(direction != ConvDirection::kBackwardData);
  }

  std::string name() const override { return "im2col:image groups"; }

  void run(const float* a, const float* b, const float* bias, float* out) override {
    // On one thread the GEMMs see no active parallel region and would fork on their own; a
    // thread count of 1 keeps them sequential, so the results stay the same.
    OmpThreads scope(team_);
    char* workspace = thread_workspace(workspace_.bytes());
    columns_ = workspace_floats(workspace, columns_at_);
    by_channel_ = workspace_floats(workspace, by_channel_at_);
    if (direction_ == ConvDirection::kForward) {
      forward(a, b, bias_relu_ ? bias : nullptr, out);
    } else {
      backward_weights(a, b, out);
    }
  }

 private:
  // out[0 .. plane_) = in[0 .. plane_): a copy of a fixed size for the small planes, where a
  // call to memcpy per image and channel cost as much as the GEMM.
  void copy_plane(const float* in, float* out) const {
    switch (plane_) {
      case 1:
        *out = *in;
        return;
      case 4:
        std::memcpy(out, in, 4 * sizeof(float));
        return;
      case 9:
        std::memcpy(out, in, 9 * sizeof(float));
        return;
      case 16:
        std::memcpy(out, in, 16 * sizeof(float));
        return;
      default:
        std::memcpy(out, in, plane_ * sizeof(float));
    }
  }

  // Inside a parallel region: columns_ [C kh kw, images Ho Wo] of the group's images xg.
  void build_columns(const float* xg, int64_t images) {
    const ConvGeometry& g = g_;
    const int64_t ld = group_ * plane_;
    if (pointwise_) {  // the columns are x as [C, images Ho Wo]
#pragma omp for schedule(static)
      for (int64_t c = 0; c < g.c; ++c)
        for (int64_t i = 0; i < images; ++i)
          copy_plane(xg + (i * g.c + c) * plane_, columns_ + c * ld + i * plane_);
    } else if (g.wo < kWideRow) {
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows_; ++r) im2col_row_of_images(g, xg, images, r, columns_ + r * ld);
    } else {
#pragma omp for schedule(static)
      for (int64_t i = 0; i < images; ++i)
        im2col(g, xg + i * g.c * g.h * g.w, columns_ + i * plane_, ld);
    }
  }

  // y [N, O, Ho Wo]: per group, by_channel [O, images Ho Wo] = w [O, C kh kw] * columns, one GEMM
  // per fixed tile, then each image's [O, Ho Wo] copied out (with a bias: max(y + bias, 0), the
  // bias op's and the relu op's arithmetic on the finished sum).
  void forward(const float* x, const float* w, const float* bias, float* y) {
    const ConvGeometry& g = g_;
    const int64_t ld = group_ * plane_;
    const int64_t tiles_o = (g.o + tile_o_ - 1) / tile_o_;
    for (int64_t first = 0; first < g.n; first += group_) {
      const int64_t images = std::min(group_, g.n - first);
      const int64_t width = images * plane_;
      const int64_t tiles = tiles_o * ((width + tile_columns_ - 1) / tile_columns_);
#pragma omp parallel num_threads(team_)
      {
        build_columns(x + first * g.c * g.h * g.w, images);
#pragma omp for schedule(dynamic)
        for (int64_t tile = 0; tile < tiles; ++tile) {
          const int64_t o = tile % tiles_o * tile_o_, p = tile / tiles_o * tile_columns_;
          sgemm('N', 'N', std::min(tile_o_, g.o - o), std::min(tile_columns_, width - p), rows_,
                w + o * rows_, rows_, columns_ + p, ld, false, by_channel_ + o * ld + p, ld);
        }
#pragma omp for schedule(static)
        for (int64_t i = 0; i < images; ++i) {
          for (int64_t o = 0; o < g.o; ++o) {
            const float* in = by_channel_ + o * ld + i * plane_;
            float* row = y + ((first + i) * g.o + o) * plane_;
            if (bias) {
              add_bias_relu(in, bias[o], plane_, row);
            } else {
              copy_plane(in, row);
            }
          }
        }
      }
    }
  }

  // dw [O, C kh kw]: per group, dy gathered to by_channel [O, images Ho Wo], then
  // dw (+)= by_channel * columns^T, one GEMM per fixed tile.
  void backward_weights(const float* dy, const float* x, float* dw) {
    const ConvGeometry& g = g_;
    if (g.n == 0) {  // no images: no gradient (the loop below would leave dw as it was)
      std::fill(dw, dw + g.o * rows_, 0.0f);
      return;
    }
    const int64_t ld = group_ * plane_;
    const int64_t tiles_o = (g.o + tile_o_ - 1) / tile_o_;
    const int64_t tiles = tiles_o * ((rows_ + tile_columns_ - 1) / tile_columns_);
    for (int64_t first = 0; first < g.n; first += group_) {
      const int64_t images = std::min(group_, g.n - first);
      const float* dyg = dy + first * g.o * plane_;
#pragma omp parallel num_threads(team_)
      {
        build_columns(x + first * g.c * g.h * g.w, images);
#pragma omp for schedule(static)
        for (int64_t o = 0; o < g.o; ++o) {
          float* row = by_channel_ + o * ld;
          for (int64_t i = 0; i < images; ++i)
            copy_plane(dyg + (i * g.o + o) * plane_, row + i * plane_);
        }
#pragma omp for schedule(dynamic)
        for (int64_t tile = 0; tile < tiles; ++tile) {
          const int64_t o = tile % tiles_o * tile_o_, r = tile / tiles_o * tile_columns_;
          sgemm('N', 'T', std::min(tile_o_, g.o - o), std::min(tile_columns_, rows_ - r),
                images * plane_, by_channel_ + o * ld, ld, columns_ + r * ld, ld, first > 0,
                dw + o * rows_ + r, rows_);
        }
      }
    }
  }

  const int64_t rows_;   // C kh kw
  const int64_t plane_;  // Ho Wo
  const int64_t group_;  // images per group
  // The tiles of one GEMM's output: kTileO channels by tile_columns_ columns (of the group's
  // output plane in the forward, of dw in the weight gradient).
  const int64_t tile_o_, tile_columns_;
  const bool pointwise_;  // 1x1, stride 1, no padding: the columns are x itself
  WorkspaceLayout workspace_;
  const size_t columns_at_;     // one group's [C kh kw, group Ho Wo]
  const size_t by_channel_at_;  // one group's y or dy as [O, group Ho Wo]
  float* columns_ = nullptr;    // the two in the workspace of the thread that runs the kernel
  float* by_channel_ = nullptr;
};

}  // namespace

std::unique_ptr<ConvKernel> make_image_group_kernel(ConvDirection direction, const ConvGeometry& g,
                                                    int threads, bool bias_relu) {
  return std::make_unique<ImageGroupKernel>(direction, g, threads, bias_relu);
}

}  // namespace purine
