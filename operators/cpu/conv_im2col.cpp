// im2col + GEMM, parallel over images. Each GEMM is one oneDNN sgemm, which runs on its calling
// thread inside an OpenMP region; the weight gradient sums per-chunk partials in a fixed order,
// so results do not depend on the thread count.
#include <glog/logging.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>

#include "operators/cpu/conv_kernel.hpp"
#include "operators/cpu/thread_workspace.hpp"
#include "operators/cpu/threading.hpp"

namespace purine {
namespace {

// The output columns ow whose input column ow * stride - pad + offset lies in [0, width).
void valid_columns(int64_t width, int64_t out_width, int64_t stride, int64_t pad, int64_t offset,
                   int64_t* begin, int64_t* end) {
  const int64_t first = pad - offset;  // smallest ow * stride that is in range
  *begin = first <= 0 ? 0 : std::min(out_width, (first + stride - 1) / stride);
  const int64_t last = width - 1 + pad - offset;  // largest ow * stride that is in range
  *end = last < 0 ? 0 : std::min(out_width, last / stride + 1);
  *end = std::max(*begin, *end);
}

}  // namespace

void sgemm(char trans_a, char trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc) {
  dnnl_status_t status =
      dnnl_sgemm(trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, accumulate ? 1.0f : 0.0f, c, ldc);
  CHECK_EQ(status, dnnl_success) << "dnnl_sgemm failed";
}

void im2col(const ConvGeometry& g, const float* x, float* columns, int64_t ld) {
  for (int64_t c = 0; c < g.c; ++c) {
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        float* row = columns + ((c * g.kh + ki) * g.kw + kj) * ld;
        int64_t begin, end;
        valid_columns(g.w, g.wo, g.stride_w, g.pad_w, kj, &begin, &end);
        for (int64_t oh = 0; oh < g.ho; ++oh) {
          float* out = row + oh * g.wo;
          const int64_t ih = oh * g.stride_h - g.pad_h + ki;
          if (ih < 0 || ih >= g.h) {
            std::fill(out, out + g.wo, 0.0f);
            continue;
          }
          const float* in = x + (c * g.h + ih) * g.w;
          const int64_t shift = kj - g.pad_w;  // the input column of ow = 0
          std::fill(out, out + begin, 0.0f);
          if (g.stride_w == 1) {
            for (int64_t ow = begin; ow < end; ++ow) out[ow] = in[ow + shift];
          } else {
            for (int64_t ow = begin; ow < end; ++ow) out[ow] = in[ow * g.stride_w + shift];
          }
          std::fill(out + end, out + g.wo, 0.0f);
        }
      }
    }
  }
}

namespace {

// dx [C, H, W] of one image = the sum of columns [C kh kw, Ho Wo] back onto their pixels.
void col2im(const ConvGeometry& g, const float* columns, float* dx) {
  const int64_t plane = g.ho * g.wo;
  std::fill(dx, dx + g.c * g.h * g.w, 0.0f);
  for (int64_t c = 0; c < g.c; ++c) {
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        const float* row = columns + ((c * g.kh + ki) * g.kw + kj) * plane;
        int64_t begin, end;
        valid_columns(g.w, g.wo, g.stride_w, g.pad_w, kj, &begin, &end);
        for (int64_t oh = 0; oh < g.ho; ++oh) {
          const int64_t ih = oh * g.stride_h - g.pad_h + ki;
          if (ih < 0 || ih >= g.h) continue;
          const float* in = row + oh * g.wo;
          float* out = dx + (c * g.h + ih) * g.w;
          const int64_t shift = kj - g.pad_w;  // the input column of ow = 0
          if (g.stride_w == 1) {
            for (int64_t ow = begin; ow < end; ++ow) out[ow + shift] += in[ow];
          } else {
            for (int64_t ow = begin; ow < end; ++ow) out[ow * g.stride_w + shift] += in[ow];
          }
        }
      }
    }
  }
}

class Im2colConvKernel : public ConvKernel {
 public:
  Im2colConvKernel(ConvDirection direction, const ConvGeometry& g, int threads, bool bias_relu)
      : ConvKernel(direction, g, threads, bias_relu),
        rows_(g.c * g.kh * g.kw),
        plane_(g.ho * g.wo),
        chunks_(std::min(g.n, kMaxChunks)),
        pointwise_(g.kh == 1 && g.kw == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h == 0 &&
                   g.pad_w == 0),
        columns_at_(workspace_.add(pointwise_ ? 0 : sizeof(float) * team_ * rows_ * plane_)),
        partials_at_(workspace_.add(direction == ConvDirection::kBackwardWeights
                                        ? sizeof(float) * chunks_ * g.o * rows_
                                        : 0)) {}

  std::string name() const override { return "im2col"; }

  void run(const float* a, const float* b, const float* bias, float* out) override {
    // On one thread the GEMMs see no active parallel region and would fork on their own; a
    // thread count of 1 keeps them sequential, so the results stay the same.
    OmpThreads scope(team_);
    char* workspace = thread_workspace(workspace_.bytes());
    columns_ = workspace_floats(workspace, columns_at_);
    partials_ = workspace_floats(workspace, partials_at_);
    switch (direction_) {
      case ConvDirection::kForward:
        forward(a, b, bias_relu_ ? bias : nullptr, out);
        break;
      case ConvDirection::kBackwardData:
        backward_data(a, b, out);
        break;
      case ConvDirection::kBackwardWeights:
        backward_weights(a, b, out);
        break;
    }
  }

 private:
  float* thread_columns() {
    const int t = omp_get_thread_num();
    CHECK_LT(t, team_);
    return columns_ + static_cast<size_t>(t) * rows_ * plane_;
  }

  // The columns of image x_i: x_i itself for a pointwise kernel, else im2col's copy.
  const float* columns_of(const float* x_i) {
    if (pointwise_) return x_i;
    float* columns = thread_columns();
    im2col(g_, x_i, columns, plane_);
    return columns;
  }

  // With a bias: then y_i = max(y_i + bias, 0), while y_i is in cache (the bias op's and the relu
  // op's arithmetic, so the same floats).
  void forward(const float* x, const float* w, const float* bias, float* y) {
    const ConvGeometry& g = g_;
#pragma omp parallel for schedule(static) num_threads(team_)
    for (int64_t i = 0; i < g.n; ++i) {
      const float* columns = columns_of(x + i * g.c * g.h * g.w);
      // y_i [O, Ho Wo] = w [O, C kh kw] * columns
      float* yi = y + i * g.o * plane_;
      sgemm('N', 'N', g.o, plane_, rows_, w, rows_, columns, plane_, false, yi, plane_);
      if (!bias) continue;
      for (int64_t o = 0; o < g.o; ++o)
        add_bias_relu(yi + o * plane_, bias[o], plane_, yi + o * plane_);
    }
  }

  void backward_data(const float* dy, const float* w, float* dx) {
    const ConvGeometry& g = g_;
#pragma omp parallel for schedule(static) num_threads(team_)
    for (int64_t i = 0; i < g.n; ++i) {
      float* dx_i = dx + i * g.c * g.h * g.w;
      // columns = w^T [C kh kw, O] * dy_i [O, Ho Wo]: dx_i itself for a pointwise kernel
      float* columns = pointwise_ ? dx_i : thread_columns();
      sgemm('T', 'N', rows_, plane_, g.o, w, rows_, dy + i * g.o * plane_, plane_, false, columns,
            plane_);
      if (!pointwise_) col2im(g, columns, dx_i);
    }
  }

  void backward_weights(const float* dy, const float* x, float* dw) {
    const ConvGeometry& g = g_;
    const int64_t size = g.o * rows_;
    if (g.n == 0) {
      std::fill(dw, dw + size, 0.0f);
      return;
    }
#pragma omp parallel for schedule(static) num_threads(team_)
    for (int64_t chunk = 0; chunk < chunks_; ++chunk) {
      float* partial = partials_ + chunk * size;
      const int64_t begin = chunk_begin(g.n, chunk, chunks_),
                    end = chunk_begin(g.n, chunk + 1, chunks_);
      for (int64_t i = begin; i < end; ++i) {
        const float* columns = columns_of(x + i * g.c * g.h * g.w);
        // partial [O, C kh kw] += dy_i [O, Ho Wo] * columns^T
        sgemm('N', 'T', g.o, rows_, plane_, dy + i * g.o * plane_, plane_, columns, plane_,
              i > begin, partial, rows_);
      }
    }
    sum_chunks(partials_, chunks_, size, dw);
  }

  const int64_t rows_;    // C kh kw
  const int64_t plane_;   // Ho Wo
  const int64_t chunks_;  // weight gradient: fixed chunks of the batch
  const bool pointwise_;  // 1x1, stride 1, no padding: the columns are the image itself
  WorkspaceLayout workspace_;
  const size_t columns_at_;   // one [rows, plane] buffer per thread of the team (none pointwise)
  const size_t partials_at_;  // weight gradient: one [O, rows] sum per chunk
  float* columns_ = nullptr;  // the two in the workspace of the thread that runs the kernel
  float* partials_ = nullptr;
};

}  // namespace

std::unique_ptr<ConvKernel> make_im2col_kernel(ConvDirection direction, const ConvGeometry& g,
                                               int threads, bool bias_relu) {
  return std::make_unique<Im2colConvKernel>(direction, g, threads, bias_relu);
}

}  // namespace purine
