// What the CPU convolution kernels share (operators/cpu/conv.cpp and conv_*.cpp): the
// kernel interface, the scoped OpenMP thread count, one-thread GEMMs and im2col.
#pragma once

#include <omp.h>

#include <cstdint>
#include <memory>
#include <string>

#include "operators/conv.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/formulas.hpp"

namespace purine {

// One direction of one convolution geometry, ready to run: run(a, b, bias, out) computes
//   forward:          (x, w)  -> y
//   backward data:    (dy, w) -> dx
//   backward weights: (dy, x) -> dw
//   forward with bias_relu: (x, w, bias) -> max(conv + bias, 0)
// (`bias` is null but in the last).
class ConvKernel {
 public:
  // Convolutions of fewer multiply-adds than this run on the calling thread alone.
  static constexpr int64_t kParallelWork = int64_t{1} << 20;

  ConvKernel(ConvDirection direction, const ConvGeometry& g, int threads, bool bias_relu = false,
             ConvBlocks blocks = {})
      : direction_(direction),
        bias_relu_(bias_relu),
        blocks_(blocks),
        g_(g),
        threads_(threads),
        team_(g.n * g.o * g.c * g.kh * g.kw * g.ho * g.wo >= kParallelWork ? threads : 1) {}
  virtual ~ConvKernel() = default;
  ConvKernel(const ConvKernel&) = delete;
  ConvKernel& operator=(const ConvKernel&) = delete;

  bool matches(const ConvGeometry& g, int threads, ConvBlocks blocks) const {
    return g == g_ && threads == threads_ && blocks == blocks_;
  }
  virtual std::string name() const = 0;
  virtual void run(const float* a, const float* b, const float* bias, float* out) = 0;

 protected:
  const ConvDirection direction_;
  const bool bias_relu_;     // kForward: conv_bias_relu's
  const ConvBlocks blocks_;  // of run()'s arguments (oneDNN's or BlockedArgsKernel)
  const ConvGeometry g_;
  const int threads_;  // the OpenMP thread count the kernel was built for
  const int team_;     // the threads it uses: threads_, or 1 for small convolutions
};

// Sets the calling thread's OpenMP thread count for a scope (oneDNN and its GEMMs read it).
class OmpThreads {
 public:
  explicit OmpThreads(int threads) : saved_(omp_get_max_threads()) {
    if (threads != saved_) omp_set_num_threads(threads);
  }
  ~OmpThreads() {
    if (omp_get_max_threads() != saved_) omp_set_num_threads(saved_);
  }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  const int saved_;
};

// The weight gradient is a sum over the batch. Its kernels cut the batch into this many fixed
// chunks at most (whatever the thread count), sum each chunk on one thread and add the chunks'
// partial sums in chunk order, so its bits do not depend on the thread count.
constexpr int64_t kMaxChunks = 8;

// The first image of chunk `chunk` of `chunks` over a batch of n.
inline int64_t chunk_begin(int64_t n, int64_t chunk, int64_t chunks) { return n * chunk / chunks; }

// dw[j] = partials[0][j] + partials[1][j] + ... in chunk order, on the caller's team (the
// kernels call it inside their OmpThreads scope).
inline void sum_chunks(const float* partials, int64_t chunks, int64_t size, float* dw) {
  parallel_for(size, size * chunks > kParallelMinArithmetic, [&](int64_t j) {
    float total = partials[j];
    for (int64_t chunk = 1; chunk < chunks; ++chunk) total += partials[chunk * size + j];
    dw[j] = total;
  });
}

// Row-major C[M, N] = op(A) op(B) (+ C when accumulate), on the calling thread when called
// inside an OpenMP parallel region.
void sgemm(char trans_a, char trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc);

// columns [C kh kw, Ho Wo] of one image x [C, H, W]; row r starts at columns + r * ld (ld is
// Ho Wo for one image alone, more when several images' columns lie side by side).
void im2col(const ConvGeometry& g, const float* x, float* columns, int64_t ld);

// out[q] = max(in[q] + b, 0) for q < n: the bias op's and the relu op's arithmetic on a finished
// convolution sum (in may be out).
inline void add_bias_relu(const float* in, float b, int64_t n, float* out) {
  for (int64_t q = 0; q < n; ++q) out[q] = formula::Relu()(in[q] + b);
}

// The weight gradient of a stride-1 convolution as dot products of shifted rows of the padded
// input (conv_shifted_rows.cpp); it fits where the CPU has AVX2 and FMA. dy (blocks.a) and x
// (blocks.b) may be in channel blocks.
bool shifted_rows_fit(const ConvGeometry& g);
std::unique_ptr<ConvKernel> make_shifted_rows_kernel(const ConvGeometry& g, int threads,
                                                     ConvBlocks blocks = {});

// Convolutions in which every output pixel sees every input pixel, as dense layers
// (conv_dense_planes.cpp), in every direction.
bool dense_planes_fit(const ConvGeometry& g);
std::unique_ptr<ConvKernel> make_dense_planes_kernel(ConvDirection direction, const ConvGeometry& g,
                                                     int threads, bool bias_relu);

// 1x1 convolutions (stride 1, no padding) over planes of at most 4 pixels as one GEMM of the
// batch's pixels in channels-last order (conv_channels_last.cpp), in every direction.
bool channels_last_fit(const ConvGeometry& g);
std::unique_ptr<ConvKernel> make_channels_last_kernel(ConvDirection direction,
                                                      const ConvGeometry& g, int threads,
                                                      bool bias_relu);

// A block of a kernel's taps: kh x kw from row first_h, column first_w.
struct TapBlock {
  int64_t first_h, first_w, kh, kw;
};
// cropped [O, C, b.kh, b.kw] = the block of w [O, C, g.kh, g.kw], on the caller's team.
void crop_weights(const ConvGeometry& g, const TapBlock& b, const float* w, float* cropped);
// dw [O, C, g.kh, g.kw] = the block's gradient `cropped` in place, zero elsewhere.
void widen_weight_gradient(const ConvGeometry& g, const TapBlock& b, const float* cropped,
                           float* dw);

// Stride-1 convolutions whose outer taps meet only padding: `inner` is the geometry of the
// taps that meet the input (conv_cropped_taps.cpp); false when every tap does. The kernel runs
// `kernel`, made for `inner`, on cropped weights.
bool crop_taps(const ConvGeometry& g, ConvGeometry* inner);
std::unique_ptr<ConvKernel> make_cropped_taps_kernel(ConvDirection direction, const ConvGeometry& g,
                                                     const ConvGeometry& inner,
                                                     std::unique_ptr<ConvKernel> kernel,
                                                     int threads);

// The forward (kForward) or weight gradient (kBackwardWeights) of small output planes as GEMMs
// over groups of images (conv_image_groups.cpp).
std::unique_ptr<ConvKernel> make_image_group_kernel(ConvDirection direction, const ConvGeometry& g,
                                                    int threads, bool bias_relu);

// 3x3 and 5x5 stride-1 convolutions (pad below the kernel size) by Winograd's F(4x4, 3x3),
// F(2x2, 3x3) and F(2x2, 5x5) in every direction (conv_winograd.cpp); it fits where the CPU has
// AVX2 and FMA. Its arguments may be in channel blocks of 8 or 16.
bool winograd_fit(const ConvGeometry& g);
// The bytes of the transformed kernels (U, or the weight gradient's dU) that `direction` of `g`
// would work with: alpha^2 positions by the input and output channels rounded up to 8.
int64_t winograd_transformed_weight_bytes(ConvDirection direction, const ConvGeometry& g);
std::unique_ptr<ConvKernel> make_winograd_kernel(ConvDirection direction, const ConvGeometry& g,
                                                 int threads, bool bias_relu, ConvBlocks blocks);

// oneDNN's kernel (in fixed batch chunks for a deterministic weight gradient); throws
// dnnl::error when oneDNN has no implementation for the geometry (conv_onednn.cpp).
std::unique_ptr<ConvKernel> make_onednn_kernel(bool deterministic, ConvDirection direction,
                                               const ConvGeometry& g, int threads, bool bias_relu,
                                               ConvBlocks blocks);
// `plain` run on plain copies of the arguments `blocks` says are in channel blocks.
std::unique_ptr<ConvKernel> make_blocked_args_kernel(std::unique_ptr<ConvKernel> plain,
                                                     ConvDirection direction, const ConvGeometry& g,
                                                     int threads, bool bias_relu,
                                                     ConvBlocks blocks);
// im2col and a GEMM per image: every geometry (conv_im2col.cpp).
std::unique_ptr<ConvKernel> make_im2col_kernel(ConvDirection direction, const ConvGeometry& g,
                                               int threads, bool bias_relu);

// Whether oneDNN runs AVX-512 kernels here (its effective ISA: ONEDNN_MAX_CPU_ISA=AVX2 caps it).
bool onednn_has_avx512();

// The kernels engine "auto" chooses among, in the order of its rules (conv_kernel_choice.cpp).
enum class KernelChoice {
  kDensePlanes,
  kChannelsLast,
  kCroppedTaps,
  kWinograd,
  kOnednn,
  kImageGroups,
  kShiftedRows,
  kIm2col
};
// The kernel for `engine` ("auto", "onednn", "im2col" or "winograd"), `direction` and `g` (oneDNN's
// may yet fail for want of an implementation: make_kernel falls back to the im2col family).
KernelChoice choose_kernel(const std::string& engine, bool deterministic, ConvDirection direction,
                           const ConvGeometry& g);
// The chosen kernel, built. Arguments in channel blocks (`blocks`) go to oneDNN's and the
// shifted-rows kernels as they are, to the others through plain copies.
std::unique_ptr<ConvKernel> make_kernel(const std::string& engine, bool deterministic,
                                        ConvDirection direction, const ConvGeometry& g, int threads,
                                        bool bias_relu, ConvBlocks blocks);

}  // namespace purine
