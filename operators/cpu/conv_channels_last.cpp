// 1x1 convolutions (stride 1, no padding) over planes of a few pixels as one GEMM of the whole
// batch's pixels. In NCHW an image's 1x1 convolution is w [O, C] times its x [C, P]; over
// GoogLeNet's 2x2 planes at 28x28, P is 4 columns, too few for a GEMM. Here the operands are
// first turned to channels-last rows, one per pixel of the batch ([N P, C] and [N P, O], by
// vector shuffles: lane_tiles.hpp), where the convolution is one GEMM in each direction:
//   forward:          y' [N P, O] = x' w^T, turned back to y (with a bias: max(y + bias, 0))
//   backward data:    dx' [N P, C] = dy' w, turned back to dx
//   backward weights: dw [O, C] = dy'^T x'
// each a blocked_sgemm (fixed blocks, so the bits do not depend on the thread count).
#include <algorithm>
#include <cstdint>

#include "operators/cpu/blocked_sgemm.hpp"
#include "operators/cpu/conv_kernel.hpp"
#include "operators/cpu/lane_tiles.hpp"
#include "operators/cpu/thread_workspace.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/cpu/vector_isa.hpp"

namespace purine {

namespace {

// Planes of at most this many pixels (where it wins: conv_kernel_choice.cpp).
constexpr int64_t kMaxPlane = 4;

// One image: rows [P, channels] = planes [channels, P], L channels at a time; and the inverse.
template <int L>
PURINE_LANES_INLINE void image_to_rows(const float* planes, int64_t channels, int64_t plane,
                                       float* rows) {
  for (int64_t c = 0; c < channels; c += L)
    LaneTiles<L>::to_rows(planes + c * plane, plane, std::min<int64_t>(L, channels - c), rows + c,
                          channels);
}
template <int L>
PURINE_LANES_INLINE void image_from_rows(const float* rows, int64_t channels, int64_t plane,
                                         float* planes) {
  for (int64_t c = 0; c < channels; c += L)
    LaneTiles<L>::from_rows(rows + c, channels, plane, std::min<int64_t>(L, channels - c),
                            planes + c * plane);
}

// Their versions for each ISA (vector_isa.hpp).
__attribute__((target("avx512f"))) void image_to_rows_avx512(const float* planes, int64_t channels,
                                                             int64_t plane, float* rows) {
  image_to_rows<16>(planes, channels, plane, rows);
}
__attribute__((target("avx2"))) void image_to_rows_avx2(const float* planes, int64_t channels,
                                                        int64_t plane, float* rows) {
  image_to_rows<8>(planes, channels, plane, rows);
}
void image_to_rows_baseline(const float* planes, int64_t channels, int64_t plane, float* rows) {
  image_to_rows<4>(planes, channels, plane, rows);
}
__attribute__((target("avx512f"))) void image_from_rows_avx512(const float* rows, int64_t channels,
                                                               int64_t plane, float* planes) {
  image_from_rows<16>(rows, channels, plane, planes);
}
__attribute__((target("avx2"))) void image_from_rows_avx2(const float* rows, int64_t channels,
                                                          int64_t plane, float* planes) {
  image_from_rows<8>(rows, channels, plane, planes);
}
void image_from_rows_baseline(const float* rows, int64_t channels, int64_t plane, float* planes) {
  image_from_rows<4>(rows, channels, plane, planes);
}

class ChannelsLastKernel : public ConvKernel {
 public:
  ChannelsLastKernel(ConvDirection direction, const ConvGeometry& g, int threads, bool bias_relu)
      : ConvKernel(direction, g, threads, bias_relu),
        p_(g.h * g.w),
        pixels_(g.n * p_),
        input_at_(workspace_.add(sizeof(float) * pixels_ * g.c)),
        output_at_(workspace_.add(sizeof(float) * pixels_ * g.o)) {}

  std::string name() const override { return "gemm:channels last"; }

  void run(const float* a, const float* b, const float* bias, float* out) override {
    OmpThreads scope(team_);
    const ConvGeometry& g = g_;
    char* workspace = thread_workspace(workspace_.bytes());
    float* x_rows = workspace_floats(workspace, input_at_);   // x' or dx' [N P, C]
    float* y_rows = workspace_floats(workspace, output_at_);  // y' or dy' [N P, O]
    switch (direction_) {
      case ConvDirection::kForward:
        to_rows(a, g.c, x_rows);
        blocked_sgemm('N', 'T', pixels_, g.o, g.c, x_rows, g.c, b, g.c, y_rows, g.o);
        from_rows(y_rows, g.o, bias_relu_ ? bias : nullptr, out);
        break;
      case ConvDirection::kBackwardData:
        to_rows(a, g.o, y_rows);
        blocked_sgemm('N', 'N', pixels_, g.c, g.o, y_rows, g.o, b, g.c, x_rows, g.c);
        from_rows(x_rows, g.c, nullptr, out);
        break;
      case ConvDirection::kBackwardWeights:
        to_rows(a, g.o, y_rows);
        to_rows(b, g.c, x_rows);
        blocked_sgemm('T', 'N', g.o, g.c, pixels_, y_rows, g.o, x_rows, g.c, out, g.c);
        break;
    }
  }

 private:
  // rows [N P, channels] = planes [N, channels, P], image by image on the caller's team.
  void to_rows(const float* planes, int64_t channels, float* rows) const {
    const int64_t plane = p_;
    parallel_for(g_.n, pixels_ * channels > kParallelMinCopy, [&](int64_t i) {
      call_for_vector_isa(image_to_rows_avx512, image_to_rows_avx2, image_to_rows_baseline,
                          planes + i * channels * plane, channels, plane,
                          rows + i * plane * channels);
    });
  }

  // planes [N, channels, P] = rows [N P, channels] (with a bias: max(rows + bias, 0), the bias
  // op's and the relu op's arithmetic on the finished sum, first on the rows in place).
  void from_rows(float* rows, int64_t channels, const float* bias, float* planes) const {
    const int64_t plane = p_;
    parallel_for(g_.n, pixels_ * channels > kParallelMinCopy, [&](int64_t i) {
      float* image_rows = rows + i * plane * channels;
      if (bias) {
        for (int64_t p = 0; p < plane; ++p) {
          float* row = image_rows + p * channels;
          for (int64_t c = 0; c < channels; ++c) row[c] = formula::Relu()(row[c] + bias[c]);
        }
      }
      call_for_vector_isa(image_from_rows_avx512, image_from_rows_avx2, image_from_rows_baseline,
                          image_rows, channels, plane, planes + i * channels * plane);
    });
  }

  const int64_t p_;       // pixels of a plane (the input's and the output's)
  const int64_t pixels_;  // of the batch: the GEMMs' rows
  WorkspaceLayout workspace_;
  const size_t input_at_, output_at_;
};

}  // namespace

bool channels_last_fit(const ConvGeometry& g) {
  return g.kh == 1 && g.kw == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h == 0 &&
         g.pad_w == 0 && g.h * g.w <= kMaxPlane;
}

std::unique_ptr<ConvKernel> make_channels_last_kernel(ConvDirection direction,
                                                      const ConvGeometry& g, int threads,
                                                      bool bias_relu) {
  return std::make_unique<ChannelsLastKernel>(direction, g, threads, bias_relu);
}

}  // namespace purine
