#include "operators/conv.hpp"

#include <glog/logging.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "base/error.hpp"
#include "operators/bias.hpp"
#include "operators/cpu/conv_kernel.hpp"
#include "operators/cpu/dnnl_context.hpp"
#include "operators/cpu/thread_workspace.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/kernel_determinism.hpp"
#include "operators/registry.hpp"

namespace purine {

bool ConvGeometry::operator==(const ConvGeometry& other) const {
  return n == other.n && c == other.c && h == other.h && w == other.w && o == other.o &&
         kh == other.kh && kw == other.kw && ho == other.ho && wo == other.wo &&
         stride_h == other.stride_h && stride_w == other.stride_w && pad_h == other.pad_h &&
         pad_w == other.pad_w;
}

namespace {

// ---------------------------------------------------------------------------------------------
// oneDNN: the primitive works in the layouts it prefers (format_tag::any, blocked channels);
// our plain NCHW / OIHW tensors are reordered in and out around it, through the calling
// thread's workspace.
class DnnlConvKernel : public ConvKernel {
 public:
  // Throws dnnl::error when oneDNN has no implementation for the geometry.
  DnnlConvKernel(ConvDirection direction, const ConvGeometry& g, int threads,
                 bool bias_relu = false, ConvBlocks blocks = {})
      : ConvKernel(direction, g, threads, bias_relu, blocks) {
    OmpThreads scope(team_);  // oneDNN sizes its scratchpads for the creating thread count
    using dnnl::memory;
    using tag = memory::format_tag;
    const dnnl::engine& engine = dnnl_context::engine();
    const memory::data_type f32 = memory::data_type::f32;
    const memory::dims src{g.n, g.c, g.h, g.w}, weights{g.o, g.c, g.kh, g.kw},
        dst{g.n, g.o, g.ho, g.wo}, strides{g.stride_h, g.stride_w}, pad_l{g.pad_h, g.pad_w},
        // The right/bottom padding that makes oneDNN's size formula give our rounded-down size.
        pad_r{(g.ho - 1) * g.stride_h + g.kh - g.h - g.pad_h,
              (g.wo - 1) * g.stride_w + g.kw - g.w - g.pad_w};
    const memory::desc src_any(src, f32, tag::any), weights_any(weights, f32, tag::any),
        dst_any(dst, f32, tag::any);
    // Our tensors' layouts: activations plain (nchw) or in channel blocks, weights plain.
    const auto activation = [&](const memory::dims& dims, int block) {
      return memory::desc(dims, f32,
                          block == 16  ? tag::nChw16c
                          : block == 8 ? tag::nChw8c
                                       : tag::nchw);
    };
    const memory::desc weights_plain(weights, f32, tag::oihw);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    // conv_bias_relu: the bias as a binary post-op (broadcast over [1, O, 1, 1]) rather than the
    // convolution's own bias, which some kernels add to a partial sum (tried: as fast, but 12 of
    // test_conv's 72 cases differ under AVX-512, 24 under AVX2): post-ops apply to the finished
    // sum, so y rounds as conv, then bias, then relu do.
    const memory::desc bias_plain({1, g.o, 1, 1}, f32, tag::nchw);
    if (bias_relu) {
      CHECK(direction == ConvDirection::kForward);
      dnnl::post_ops post;
      post.append_binary(dnnl::algorithm::binary_add, bias_plain);
      post.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      attr.set_post_ops(post);
    }

    const auto algo = dnnl::algorithm::convolution_direct;
    const dnnl::convolution_forward::desc forward_desc(dnnl::prop_kind::forward_training, algo,
                                                       src_any, weights_any, dst_any, strides,
                                                       pad_l, pad_r);
    dnnl::convolution_forward::primitive_desc forward(forward_desc, attr, engine);
    // oneDNN's GEMM-based convolution (SSE4.1-only CPUs, few-channel stems) rounds differently
    // with post-ops than without (8 of test_conv's conv_bias_relu cases under SSE41): it runs
    // without them there, and run() adds the bias and applies the ReLU to the finished output.
    if (bias_relu && std::string(forward.impl_info_str()).find("gemm") != std::string::npos) {
      dnnl::primitive_attr without_post_ops;
      without_post_ops.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      forward = dnnl::convolution_forward::primitive_desc(forward_desc, without_post_ops, engine);
      bias_relu_after_ = true;
    }
    memory::desc scratchpad;
    switch (direction) {
      case ConvDirection::kForward:
        primitive_ = dnnl::convolution_forward(forward);
        impl_ = forward.impl_info_str();
        scratchpad = forward.scratchpad_desc();
        add_arg(DNNL_ARG_SRC, activation(src, blocks.a), forward.src_desc(), false);
        add_arg(DNNL_ARG_WEIGHTS, weights_plain, forward.weights_desc(), false);
        add_arg(DNNL_ARG_DST, activation(dst, blocks.out), forward.dst_desc(), true);
        if (bias_relu && !bias_relu_after_)
          add_arg(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, bias_plain, bias_plain,
                  false);
        break;
      case ConvDirection::kBackwardData: {
        dnnl::convolution_backward_data::primitive_desc pd(
            dnnl::convolution_backward_data::desc(algo, src_any, weights_any, dst_any, strides,
                                                  pad_l, pad_r),
            attr, engine, forward);
        primitive_ = dnnl::convolution_backward_data(pd);
        impl_ = pd.impl_info_str();
        scratchpad = pd.scratchpad_desc();
        add_arg(DNNL_ARG_DIFF_DST, activation(dst, blocks.a), pd.diff_dst_desc(), false);
        add_arg(DNNL_ARG_WEIGHTS, weights_plain, pd.weights_desc(), false);
        add_arg(DNNL_ARG_DIFF_SRC, activation(src, blocks.out), pd.diff_src_desc(), true);
        break;
      }
      case ConvDirection::kBackwardWeights: {
        dnnl::convolution_backward_weights::primitive_desc pd(
            dnnl::convolution_backward_weights::desc(algo, src_any, weights_any, dst_any, strides,
                                                     pad_l, pad_r),
            attr, engine, forward);
        primitive_ = dnnl::convolution_backward_weights(pd);
        impl_ = pd.impl_info_str();
        scratchpad = pd.scratchpad_desc();
        add_arg(DNNL_ARG_DIFF_DST, activation(dst, blocks.a), pd.diff_dst_desc(), false);
        add_arg(DNNL_ARG_SRC, activation(src, blocks.b), pd.src_desc(), false);
        add_arg(DNNL_ARG_DIFF_WEIGHTS, weights_plain, pd.diff_weights_desc(), true);
        break;
      }
    }
    if (scratchpad.get_size() > 0) {
      scratchpad_ = memory(scratchpad, engine, DNNL_MEMORY_NONE);
      scratchpad_offset_ = workspace_.add(scratchpad.get_size());
      exec_args_[DNNL_ARG_SCRATCHPAD] = scratchpad_;
    }
  }

  std::string name() const override { return "onednn:" + impl_; }

  void run(const float* a, const float* b, const float* bias, float* out) override {
    OmpThreads scope(team_);
    dnnl::stream& stream = dnnl_context::stream();
    args_[0].user.set_data_handle(const_cast<float*>(a));
    args_[1].user.set_data_handle(const_cast<float*>(b));
    args_[2].user.set_data_handle(out);
    if (num_args_ > 3) args_[3].user.set_data_handle(const_cast<float*>(bias));
    char* workspace = thread_workspace(workspace_.bytes());
    for (int i = 0; i < num_args_; ++i) {
      if (args_[i].reordered) args_[i].inner.set_data_handle(workspace + args_[i].offset);
    }
    if (scratchpad_) scratchpad_.set_data_handle(workspace + scratchpad_offset_);
    for (int i = 0; i < 2; ++i) {
      if (args_[i].reordered) args_[i].reorder.execute(stream, args_[i].user, args_[i].inner);
    }
    primitive_.execute(stream, exec_args_);
    if (args_[2].reordered) args_[2].reorder.execute(stream, args_[2].inner, args_[2].user);
    stream.wait();
    if (bias_relu_after_) add_bias_relu_in_place(bias, out);
  }

 private:
  struct Arg {
    dnnl::memory user;   // our tensor's layout; the data handle is set on every run
    dnnl::memory inner;  // what the primitive reads or writes (user itself if layouts agree)
    dnnl::reorder reorder;
    bool reordered = false;
    size_t offset = 0;  // of `inner` in the thread's workspace, when reordered
  };

  void add_arg(int id, const dnnl::memory::desc& user, const dnnl::memory::desc& wanted,
               bool output) {
    const dnnl::engine& engine = dnnl_context::engine();
    Arg arg;
    arg.user = dnnl::memory(user, engine, DNNL_MEMORY_NONE);
    if (wanted == user) {
      arg.inner = arg.user;
    } else {
      arg.inner = dnnl::memory(wanted, engine, DNNL_MEMORY_NONE);
      arg.offset = workspace_.add(wanted.get_size());
      arg.reordered = true;
      arg.reorder =
          output ? dnnl::reorder(arg.inner, arg.user) : dnnl::reorder(arg.user, arg.inner);
    }
    exec_args_[id] = arg.inner;
    args_[num_args_++] = arg;
  }

  // out = max(out + bias, 0) per channel, in the output's layout (plain or channel blocks).
  void add_bias_relu_in_place(const float* bias, float* out) const {
    const ConvGeometry& g = g_;
    const int64_t plane = g.ho * g.wo, block = blocks_.out;
    if (block == 0) {
      parallel_for(g.n * g.o, team_ > 1, [&](int64_t p) {
        float* y = out + p * plane;
        add_bias_relu(y, bias[p % g.o], plane, y);
      });
      return;
    }
    // [N, O/b, Ho, Wo, b]: each pixel's b channels take the bias of their block.
    parallel_for(g.n * (g.o / block), team_ > 1, [&](int64_t p) {
      const float* b = bias + (p % (g.o / block)) * block;
      float* y = out + p * plane * block;
      for (int64_t q = 0; q < plane; ++q, y += block) {
        for (int64_t lane = 0; lane < block; ++lane) y[lane] = formula::Relu()(y[lane] + b[lane]);
      }
    });
  }

  dnnl::primitive primitive_;
  std::string impl_;
  bool bias_relu_after_ = false;  // bias_relu by run() rather than by post-ops
  Arg args_[4];  // the two inputs, the output, then the bias of a forward with bias_relu
  int num_args_ = 0;
  dnnl::memory scratchpad_;
  size_t scratchpad_offset_ = 0;
  WorkspaceLayout workspace_;  // the reordered copies and the scratchpad
  std::unordered_map<int, dnnl::memory> exec_args_;
};

// The chunks of ChunkedDnnlWeightGradKernel: as many as give each at least this many output
// pixels (images x plane), a power of two, at least 2 (for 2 threads) and at most kMaxChunks.
// A chunk pays for its own partial sum of the whole gradient (oneDNN writes it blocked and
// reorders it, then the chunks are added), so on small planes fewer, larger chunks win: on 2
// Zen 5 cores (AVX-512, batch 64, bench_conv_layers with 8 / 4 / 2 chunks, 2026-11-28) GoogLeNet
// at 28x28's 4x4 and 7x7 weight gradients took 9.8 / 7.7 / 6.3 ms, googlenet_small's 175 / 160
// / 157 ms, resnet20's 13.4 / 12.9 / 12.8 ms.
constexpr int64_t kMinChunkPixels = 4096;
int64_t weight_grad_chunks(const ConvGeometry& g) {
  int64_t chunks = 2;
  while (chunks < kMaxChunks && g.n * g.ho * g.wo / (2 * chunks) >= kMinChunkPixels) chunks *= 2;
  return std::max<int64_t>(1, std::min(g.n, chunks));
}

// oneDNN's weight gradient with bits independent of the thread count. Its blocked kernels split
// the batch reduction among the threads they are given (on AVX-512 machines differently for 1
// and 3 threads); here each fixed chunk of the batch (weight_grad_chunks, from the geometry
// alone) has a primitive built for one thread, the chunks run in parallel, and their partial
// sums are added in chunk order.
class ChunkedDnnlWeightGradKernel : public ConvKernel {
 public:
  // Throws dnnl::error when oneDNN has no implementation for a chunk's geometry.
  ChunkedDnnlWeightGradKernel(const ConvGeometry& g, int threads, ConvBlocks blocks)
      : ConvKernel(ConvDirection::kBackwardWeights, g, threads, false, blocks),
        chunks_(weight_grad_chunks(g)),
        size_(g.o * g.c * g.kh * g.kw) {
    for (int64_t chunk = 0; chunk < chunks_; ++chunk) {
      ConvGeometry part = g;
      part.n = chunk_begin(g.n, chunk + 1, chunks_) - chunk_begin(g.n, chunk, chunks_);
      // A chunk of whole images is contiguous in channel blocks too.
      parts_.push_back(std::make_unique<DnnlConvKernel>(direction_, part, 1, false, blocks));
    }
    partials_.resize(static_cast<size_t>(chunks_) * size_);
  }

  std::string name() const override { return str(parts_[0]->name(), " in ", chunks_, " chunks"); }

  void run(const float* dy, const float* x, const float*, float* dw) override {
    OmpThreads scope(team_);
    const ConvGeometry& g = g_;
#pragma omp parallel for schedule(static) num_threads(team_)
    for (int64_t chunk = 0; chunk < chunks_; ++chunk) {
      const int64_t begin = chunk_begin(g.n, chunk, chunks_);
      parts_[chunk]->run(dy + begin * g.o * g.ho * g.wo, x + begin * g.c * g.h * g.w, nullptr,
                         partials_.data() + chunk * size_);
    }
    sum_chunks(partials_.data(), chunks_, size_, dw);
  }

 private:
  const int64_t chunks_;
  const int64_t size_;                                  // O C kh kw
  std::vector<std::unique_ptr<DnnlConvKernel>> parts_;  // one-thread primitives, one per chunk
  std::vector<float> partials_;                         // one [O, C, kh, kw] sum per chunk
};

// A kernel that reads and writes plain tensors, for arguments in channel blocks: each blocked
// argument goes through a plain copy of its own (oneDNN reorders), as oneDNN's kernels reorder
// what their primitives want. For the convolutions whose kernel is not oneDNN's (a stem of 3
// input channels, small planes) next to blocked activations.
class BlockedArgsKernel : public ConvKernel {
 public:
  BlockedArgsKernel(std::unique_ptr<ConvKernel> plain, ConvDirection direction,
                    const ConvGeometry& g, int threads, bool bias_relu, ConvBlocks blocks)
      : ConvKernel(direction, g, threads, bias_relu, blocks), plain_(std::move(plain)) {
    const dnnl::memory::dims x{g.n, g.c, g.h, g.w}, y{g.n, g.o, g.ho, g.wo};
    const bool forward = direction == ConvDirection::kForward;
    a_ = Copy(forward ? x : y, blocks.a, /*to_plain=*/true);
    b_ = Copy(x, direction == ConvDirection::kBackwardWeights ? blocks.b : 0, true);
    out_ =
        Copy(forward ? y : x, direction == ConvDirection::kBackwardWeights ? 0 : blocks.out, false);
  }

  std::string name() const override { return plain_->name() + " (channel blocks reordered)"; }

  void run(const float* a, const float* b, const float* bias, float* out) override {
    OmpThreads scope(team_);
    float* result = out_.blocked() ? out_.plain.data() : out;
    plain_->run(a_.to_plain(a), b_.to_plain(b), bias, result);
    if (out_.blocked()) out_.from_plain(out);
  }

 private:
  // One argument: a plain copy and the reorder between it and the blocked tensor.
  struct Copy {
    Copy() = default;
    Copy(const dnnl::memory::dims& dims, int block, bool to_plain) {
      if (block == 0) return;
      using tag = dnnl::memory::format_tag;
      const dnnl::engine& engine = dnnl_context::engine();
      const auto f32 = dnnl::memory::data_type::f32;
      blocked_memory = dnnl::memory({dims, f32, block == 16 ? tag::nChw16c : tag::nChw8c}, engine,
                                    DNNL_MEMORY_NONE);
      plain.resize(dims[0] * dims[1] * dims[2] * dims[3]);
      plain_memory = dnnl::memory({dims, f32, tag::nchw}, engine, plain.data());
      reorder = to_plain ? dnnl::reorder(blocked_memory, plain_memory)
                         : dnnl::reorder(plain_memory, blocked_memory);
    }
    bool blocked() const { return !plain.empty(); }
    const float* to_plain(const float* blocked) {
      if (!this->blocked()) return blocked;
      blocked_memory.set_data_handle(const_cast<float*>(blocked));
      reorder.execute(dnnl_context::stream(), blocked_memory, plain_memory);
      dnnl_context::stream().wait();
      return plain.data();
    }
    void from_plain(float* blocked) {
      blocked_memory.set_data_handle(blocked);
      reorder.execute(dnnl_context::stream(), plain_memory, blocked_memory);
      dnnl_context::stream().wait();
    }
    std::vector<float> plain;  // its own memory: the plain kernel uses the thread's workspace
    dnnl::memory blocked_memory, plain_memory;
    dnnl::reorder reorder;
  };

  std::unique_ptr<ConvKernel> plain_;
  Copy a_, b_, out_;
};

// ---------------------------------------------------------------------------------------------
// im2col + GEMM, parallel over images. Each GEMM is one oneDNN sgemm, which runs on its calling
// thread inside an OpenMP region; the weight gradient sums per-chunk partials in a fixed order,
// so results do not depend on the thread count.

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
        columns_at_(workspace_.add(sizeof(float) * team_ * rows_ * plane_)) {
    if (direction == ConvDirection::kBackwardWeights) {
      partials_.resize(static_cast<size_t>(chunks_) * g.o * rows_);
    }
  }

  std::string name() const override { return "im2col"; }

  void run(const float* a, const float* b, const float* bias, float* out) override {
    // On one thread the GEMMs see no active parallel region and would fork on their own; a
    // thread count of 1 keeps them sequential, so the results stay the same.
    OmpThreads scope(team_);
    columns_ = workspace_floats(thread_workspace(workspace_.bytes()), columns_at_);
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

  // With a bias: then y_i = max(y_i + bias, 0), while y_i is in cache (the bias op's and the relu
  // op's arithmetic, so the same floats).
  void forward(const float* x, const float* w, const float* bias, float* y) {
    const ConvGeometry& g = g_;
#pragma omp parallel for schedule(static) num_threads(team_)
    for (int64_t i = 0; i < g.n; ++i) {
      float* columns = thread_columns();
      im2col(g, x + i * g.c * g.h * g.w, columns, plane_);
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
      float* columns = thread_columns();
      // columns = w^T [C kh kw, O] * dy_i [O, Ho Wo]
      sgemm('T', 'N', rows_, plane_, g.o, w, rows_, dy + i * g.o * plane_, plane_, false, columns,
            plane_);
      col2im(g, columns, dx + i * g.c * g.h * g.w);
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
      float* columns = thread_columns();
      float* partial = partials_.data() + chunk * size;
      const int64_t begin = chunk_begin(g.n, chunk, chunks_),
                    end = chunk_begin(g.n, chunk + 1, chunks_);
      for (int64_t i = begin; i < end; ++i) {
        im2col(g, x + i * g.c * g.h * g.w, columns, plane_);
        // partial [O, C kh kw] += dy_i [O, Ho Wo] * columns^T
        sgemm('N', 'T', g.o, rows_, plane_, dy + i * g.o * plane_, plane_, columns, plane_,
              i > begin, partial, rows_);
      }
    }
    sum_chunks(partials_.data(), chunks_, size, dw);
  }

  const int64_t rows_;    // C kh kw
  const int64_t plane_;   // Ho Wo
  const int64_t chunks_;  // weight gradient: fixed chunks of the batch
  WorkspaceLayout workspace_;
  const size_t columns_at_;      // one [rows, plane] buffer per thread of the team
  float* columns_ = nullptr;     // in the workspace of the thread that runs the kernel
  std::vector<float> partials_;  // weight gradient: one [O, rows] sum per chunk
};

// Output planes of at most this many pixels count as small (see make_kernel): the weight
// gradients' and the forward's, with oneDNN's AVX2 kernels and with its AVX-512 ones.
// The im2col family runs weight gradients and forwards of planes up to kImageGroupsMaxPlane as
// GEMMs over image groups.
struct SmallPlanes {
  int64_t weights, forward;
};
constexpr int64_t kImageGroupsMaxPlane = 49;
constexpr SmallPlanes kSmallPlanesAvx2{16, 4};
constexpr SmallPlanes kSmallPlanesAvx512{9, 1};
// Weight gradients of at most this many output channels go to shifted rows (see make_kernel).
constexpr int64_t kShiftedRowsMaxOutputs = 32;

// Whether oneDNN runs AVX-512 kernels here (its effective ISA: ONEDNN_MAX_CPU_ISA=AVX2 caps it).
bool onednn_has_avx512() {
  static const bool has =
      (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  return has;
}

// Whether make_kernel's "auto" picks oneDNN for `direction` and `g` once the special kernels
// (dense planes, channels last, cropped taps) have passed (the measurements: make_kernel).
bool auto_takes_onednn(bool deterministic, ConvDirection direction, const ConvGeometry& g) {
  const int64_t plane = g.ho * g.wo;
  const SmallPlanes& small_planes = onednn_has_avx512() ? kSmallPlanesAvx512 : kSmallPlanesAvx2;
  const bool small =
      (direction == ConvDirection::kBackwardWeights && plane <= small_planes.weights) ||
      (direction == ConvDirection::kForward && plane <= small_planes.forward);
  // Measured at stride 1 over planes of 14x14 and up; a strided 3x3 (resnet20's 28x28 -> 14x14)
  // went to im2col, not shifted rows, which lost to oneDNN's chunks (see make_kernel).
  const bool avx2_small_kernel_weights =
      direction == ConvDirection::kBackwardWeights && deterministic && !onednn_has_avx512() &&
      plane > kImageGroupsMaxPlane &&
      (g.kh * g.kw == 1 || (g.kh * g.kw <= 9 && g.stride_h == 1 && g.stride_w == 1));
  return !small && !avx2_small_kernel_weights &&
         (direction == ConvDirection::kForward || (g.c >= 8 && g.o >= 8));
}

// The kernels make_kernel chooses among (the measurements behind the choice: make_kernel).
enum class KernelChoice {
  kDensePlanes,
  kChannelsLast,
  kCroppedTaps,
  kOnednn,
  kImageGroups,
  kShiftedRows,
  kIm2col
};

// The im2col family's kernel for `direction` and `g`: what runs where oneDNN does not.
KernelChoice im2col_family_kernel(ConvDirection direction, const ConvGeometry& g) {
  if (g.ho * g.wo <= kImageGroupsMaxPlane && direction != ConvDirection::kBackwardData)
    return KernelChoice::kImageGroups;
  if (direction == ConvDirection::kBackwardWeights && g.o <= kShiftedRowsMaxOutputs &&
      shifted_rows_fit(g))
    return KernelChoice::kShiftedRows;
  return KernelChoice::kIm2col;
}

// The kernel for `engine` ("auto", "onednn" or "im2col"), `direction` and `g` (oneDNN's may yet
// fail for want of an implementation: make_kernel falls back to the im2col family).
KernelChoice choose_kernel(const std::string& engine, bool deterministic, ConvDirection direction,
                           const ConvGeometry& g) {
  ConvGeometry inner;
  if (engine == "auto" && dense_planes_fit(g)) return KernelChoice::kDensePlanes;
  if (engine == "auto" && channels_last_fit(g)) return KernelChoice::kChannelsLast;
  if (engine == "auto" && crop_taps(g, &inner)) return KernelChoice::kCroppedTaps;
  if ((engine == "onednn" ||
       (engine == "auto" && auto_takes_onednn(deterministic, direction, g))) &&
      g.n > 0)
    return KernelChoice::kOnednn;
  return im2col_family_kernel(direction, g);
}

// oneDNN's kernel; throws dnnl::error when oneDNN has no implementation for the geometry.
std::unique_ptr<ConvKernel> make_onednn_kernel(bool deterministic, ConvDirection direction,
                                               const ConvGeometry& g, int threads, bool bias_relu,
                                               ConvBlocks blocks) {
  if (direction == ConvDirection::kBackwardWeights && deterministic)
    return std::make_unique<ChunkedDnnlWeightGradKernel>(g, threads, blocks);
  return std::make_unique<DnnlConvKernel>(direction, g, threads, bias_relu, blocks);
}

// `engine` is "auto", "onednn" or "im2col" (validated by the caller). Arguments in channel
// blocks (`blocks`) go to oneDNN's and the shifted-rows kernels as they are, to the others
// through plain copies.
std::unique_ptr<ConvKernel> make_kernel(const std::string& engine, bool deterministic,
                                        ConvDirection direction, const ConvGeometry& g, int threads,
                                        bool bias_relu, ConvBlocks blocks) {
  const KernelChoice choice = choose_kernel(engine, deterministic, direction, g);
  if (!(blocks == ConvBlocks{})) {
    if (choice == KernelChoice::kOnednn) {
      try {
        return make_onednn_kernel(deterministic, direction, g, threads, bias_relu, blocks);
      } catch (const dnnl::error&) {
        // No oneDNN implementation for this geometry: the plain kernel, as below.
      }
    }
    if (choice == KernelChoice::kShiftedRows) return make_shifted_rows_kernel(g, threads, blocks);
    return std::make_unique<BlockedArgsKernel>(
        make_kernel(engine, deterministic, direction, g, threads, bias_relu, {}), direction, g,
        threads, bias_relu, blocks);
  }
  // Measured on 2 Zen 3 cores (batch 64, 5x5, pad 2): oneDNN's blocked kernels win everywhere
  // except the backward passes with few channels, where blocking pads C up to 8
  // (1 -> 32 channels, 28x28: im2col 1.0 / 1.4 ms for data / weights vs oneDNN 6.4 / 6.3 ms).
  // Small output planes (GoogLeNet's last inceptions: 7x7 at 224x224, 1x1 to 4x4 at 28x28) go
  // to GEMMs over groups of images (bench_conv_layers, batch 64, 2 AVX2 cores, GoogLeNet at
  // 28x28): the weight gradients of planes up to 7x7 (37 ms in all against 98 as oneDNN's chunks
  // and 60-67 as one oneDNN primitive; level at 6x6 and 7x7, oneDNN ahead from 8x8), and the
  // forward of planes up to 2x2 (GoogLeNet's twelve 1x1: 3.5 ms in all against 6.5; its 2x2
  // ones: 11.4-12.3 against 12.9-14.2; oneDNN ahead at 4x4). oneDNN's data gradient wins at every
  // size (image groups with col2im: 66 against 36 ms over GoogLeNet's). Where oneDNN has only
  // AVX2 kernels, its deterministic weight gradients of 3x3 and 1x1 kernels lose to im2col's at
  // larger planes too (googlenet_small, 14x14 and 28x28, 2 AVX2 EPYC cores, 2026-11-27: conv2
  // 73 against 89 ms, the 3x3s 37 / 20 against 46 / 23, the 1x1s 10-25%; 378 against 408 ms
  // for all its weight gradients), its 5x5 ones win (14 against 15, 2.8 against 5.9 ms); not
  // measured with AVX-512, which keeps oneDNN. Of what im2col gets, the stride-1 weight gradients
  // of up to 32 output channels go to dot products of shifted rows (conv_shifted_rows.cpp), which
  // write no columns (same machine, 2026-11-27, two alternating rounds: resnet20's 16 -> 16 at
  // 28x28 2.3-3.0 against 4.8-4.9 ms, 32 -> 32 at 14x14 2.5-3.2 against 4.3-4.7, its 1 -> 16
  // stem 0.22-0.28 against 0.61-0.63, convnet_bn's 1 -> 32 5x5 1.1-1.2 against 1.7); with more
  // output channels im2col's GEMM wins (googlenet_small's 96 -> 128 3x3 at 14x14: 32 against 28
  // ms, 128 -> 192: 80 against 51) and small planes stay with image groups (level at 7x7).
  // Those small planes were measured where oneDNN had only AVX2 kernels. With AVX-512 (2 Zen 5
  // cores, 2026-11-28, bench_conv_layers, GoogLeNet at 28x28 unless said) oneDNN wins more:
  // its chunks take the weight gradients of 4x4 to 7x7 planes (GoogLeNet's: 7.5 against 11.8
  // ms; resnet18's 7x7 64 -> 64: 0.90 against 3.58), are level at 3x3 (GoogLeNet at 20x20: 4.0
  // against 4.1 ms) and lose at 2x2 and 1x1 (its 3x3 kernels 1.2-3.3 against 0.3-1.0 ms); its
  // forward takes 2x2 planes (6.2 against 8.1 ms) and loses at 1x1 (5x5 kernels over a padded
  // 1x1 plane: 0.68-0.94 against 0.10-0.14 ms). Training images/s, alternating runs: GoogLeNet
  // 1.06-1.10x, resnet20 1.21x. On a 2-core AVX2-only EPYC (2026-11-29, bench_conv_layers
  // --directions=weight, batch 64), after oneDNN's chunks were retuned for small planes
  // (weight_grad_chunks), its chunks beat the image groups from 5x5 planes up (GoogLeNet-28's 7x7
  // conv2 5.4 against 7.4 ms, its 1x1 0.22 against 0.52; resnet20's 7x7 3x3s 2.6 against 3.0-3.6,
  // once strided 1.4 against 1.8) and im2col on resnet20's strided 3x3 over 28x28 (1.6-1.8 against
  // 2.4-3.0); at 4x4 they were level (3x3s 2.7 / 5.2 against 3.1 / 5.4, 5x5s 0.71 / 2.9 against
  // 0.68 / 2.4), so image groups keep planes up to 4x4 with AVX2 kernels.
  // With AVX-512, oneDNN's chunks would also win the weight gradients of stems with fewer than 8
  // input channels (same machine and day: convnet_bn's 1 -> 32 5x5 at 28x28 0.42 against 0.72 ms
  // as shifted rows, GoogLeNet's 1 -> 64 7x7 0.35 against 0.81 as im2col), but stems keep our
  // kernels: those sum each image alone, so replicas of half a batch add up to the whole batch's
  // gradient almost bit for bit, which oneDNN's chunks do not (test_trainer_sync_bn: 2 x 16
  // synchronized images drifted 6.8e-4 in the loss from 1 x 32 after 12 iterations, against
  // its 1e-5). About 1% of convnet_bn's step. (These choices: auto_takes_onednn.)
  // Every output pixel sees every input pixel (GoogLeNet's 1x1 and 2x2 planes at 28x28): a dense
  // layer of the taps joining each pair of pixels, in every direction (2 Zen 5 cores,
  // 2026-11-28, in training traces: the 48 convolution ops of its 1x1 planes 8.0 against 3.0 ms
  // per iteration, capped at AVX2 11.0 against 3.7; the 30 of the 3x3 and 5x5 kernels over its
  // 2x2 planes 6.3 against 12.4, oneDNN's and the image groups' before).
  if (choice == KernelChoice::kDensePlanes)
    return make_dense_planes_kernel(direction, g, threads, bias_relu);
  // 1x1 kernels over planes of up to 4 pixels: one GEMM of the batch in channels-last order
  // (same machine and day, GoogLeNet-28's 2x2 planes, bench_conv_layers: forward 2.73 / data
  // 2.59 / weights 3.55 ms as oneDNN's 1x1 kernels and image groups against 2.64 / 2.43 / 3.07;
  // capped at AVX2 5.00 / 4.92 / 5.25 against 4.06 / 4.77 / 5.51; in two alternating traced
  // training pairs its 1x1 ops 22.4 / 22.0 against 20.9 / 20.5 ms). Not at 4x4 and up: the
  // weight gradients there lost to oneDNN's chunks (1.11 against 1.68 ms), the rest level.
  if (choice == KernelChoice::kChannelsLast)
    return make_channels_last_kernel(direction, g, threads, bias_relu);
  // Outer taps that meet only padding (GoogLeNet's 5x5 kernels over 2x2 planes at 28x28): the
  // convolution of the taps that meet the input, by the kernel for that geometry.
  ConvGeometry inner;
  if (choice == KernelChoice::kCroppedTaps && crop_taps(g, &inner))
    return make_cropped_taps_kernel(
        direction, g, inner,
        make_kernel(engine, deterministic, direction, inner, threads, bias_relu, {}), threads);
  KernelChoice family = choice;
  if (choice == KernelChoice::kOnednn) {
    try {
      return make_onednn_kernel(deterministic, direction, g, threads, bias_relu, {});
    } catch (const dnnl::error& e) {
      // No oneDNN implementation for this geometry: im2col handles every geometry.
      require(engine == "auto", "oneDNN has no convolution for this geometry (", e.what(),
              "); use engine 'auto' or 'im2col'");
      family = im2col_family_kernel(direction, g);
    }
  }
  if (family == KernelChoice::kImageGroups)
    return make_image_group_kernel(direction, g, threads, bias_relu);
  if (family == KernelChoice::kShiftedRows) return make_shifted_rows_kernel(g, threads);
  return std::make_unique<Im2colConvKernel>(direction, g, threads, bias_relu);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

ConvParams::ConvParams(const Attrs& attrs, const char* type)
    : stride_h(attrs.get_int("stride_h", attrs.get_int("stride", 1))),
      stride_w(attrs.get_int("stride_w", attrs.get_int("stride", 1))),
      pad_h(attrs.get_int("pad_h", attrs.get_int("pad", 0))),
      pad_w(attrs.get_int("pad_w", attrs.get_int("pad", 0))),
      engine(attrs.get_string("engine", "auto")),
      deterministic(static_cast<int>(attrs.get_int("deterministic", -1))),
      gpu_algorithm(static_cast<int>(attrs.get_int("gpu_algorithm", -1))) {
  require(stride_h >= 1 && stride_w >= 1, type, ": stride is ", stride_h, "x", stride_w,
          ", expected 1 or more");
  require(pad_h >= 0 && pad_w >= 0, type, ": pad is ", pad_h, "x", pad_w, ", expected 0 or more");
  require(engine == "auto" || engine == "onednn" || engine == "im2col", type, ": engine is '",
          engine, "', expected 'auto', 'onednn' or 'im2col'");
  require(deterministic >= -1 && deterministic <= 1, type, ": deterministic is ", deterministic,
          ", expected 0 or 1");
}

bool ConvParams::deterministic_now() const {
  return deterministic < 0 ? deterministic_kernels() : deterministic == 1;
}

ConvOpBase::ConvOpBase(Attrs attrs, const char* type)
    : Operator(std::move(attrs)), params_(attrs_, type) {}
ConvOpBase::~ConvOpBase() = default;

std::string ConvOpBase::kernel_name() const { return kernel_ ? kernel_->name() : ""; }

ConvGeometry ConvOpBase::geometry(const Shape& x, int x_input, const Shape& w, int w_input) const {
  ConvGeometry g;
  g.stride_h = params_.stride_h;
  g.stride_w = params_.stride_w;
  g.pad_h = params_.pad_h;
  g.pad_w = params_.pad_w;
  require(x.ndim() == 4, type(), ": input ", x_input, " (x) has shape ", x,
          ", expected [N, C, H, W]");
  require(w.ndim() == 4, type(), ": input ", w_input, " (weight) has shape ", w,
          ", expected [O, C, kh, kw]");
  require(w[1] == x[1], type(), ": input ", w_input, " (weight) has ", w[1], " channels, input ",
          x_input, " has ", x[1], "; expected equal");
  g.n = x[0];
  g.c = x[1];
  g.h = x[2];
  g.w = x[3];
  g.o = w[0];
  g.kh = w[2];
  g.kw = w[3];
  require(g.kh >= 1 && g.kw >= 1, type(), ": input ", w_input, " (weight) has an empty kernel ",
          g.kh, "x", g.kw);
  require(g.h + 2 * g.pad_h >= g.kh && g.w + 2 * g.pad_w >= g.kw, type(), ": kernel ", g.kh, "x",
          g.kw, " is larger than the padded input ", g.h + 2 * g.pad_h, "x", g.w + 2 * g.pad_w,
          " (input ", x_input, " has shape ", x, ", pad ", g.pad_h, "x", g.pad_w, ")");
  g.ho = (g.h + 2 * g.pad_h - g.kh) / g.stride_h + 1;
  g.wo = (g.w + 2 * g.pad_w - g.kw) / g.stride_w + 1;
  return g;
}

ConvKernel& ConvOpBase::kernel(ConvDirection direction, const ConvGeometry& g, bool bias_relu,
                               ConvBlocks blocks) {
  const int threads = omp_get_max_threads();
  if (!kernel_ || !kernel_->matches(g, threads, blocks)) {
    try {
      kernel_ = make_kernel(params_.engine, params_.deterministic_now(), direction, g, threads,
                            bias_relu, blocks);
    } catch (const Error& e) {
      throw Error(str(type(), ": ", e.what()));
    }
  }
  return *kernel_;
}

// oneDNN's direct convolutions keep activations in blocks of 16 channels with AVX-512 and of 8
// with AVX2 (nChw16c, nChw8c); blocks of that size meet no reorder there.
int conv_channel_block() { return onednn_has_avx512() ? 16 : 8; }

ChannelBlocking ConvOpBase::blocking(ConvDirection direction, const Shape& x, int x_input,
                                     const Shape& w, int w_input, int block,
                                     ChannelBlocking blocking) const {
  if (block != conv_channel_block() || x.ndim() != 4 || w.ndim() != 4) return {};
  // oneDNN's kernel reorders plain arguments; most others (small planes, stems) reorder blocked
  // ones through plain copies (BlockedArgsKernel). Taking blocks wherever oneDNN's kernel took
  // them cost GoogLeNet-28, whose small planes go to our kernels, 2-4% of its step (2 Zen 5
  // cores, 2026-11-29); taking them only there cost resnet20 10%, whose stem's and last
  // stage's weight gradients are ours. The rewrite weighs both.
  // The shifted-rows weight gradient reads either layout as it is.
  switch (choose_kernel(params_.engine, params_.deterministic_now(), direction,
                        geometry(x, x_input, w, w_input))) {
    case KernelChoice::kOnednn:
      blocking.reorders = ChannelBlocking::kInPlain;
      break;
    case KernelChoice::kShiftedRows:
      blocking.reorders = ChannelBlocking::kNever;
      break;
    default:
      blocking.reorders = ChannelBlocking::kInBlocks;
  }
  return blocking;
}

ChannelBlocking ConvOp::channel_blocking(const std::vector<Shape>& inputs, int block) const {
  return blocking(ConvDirection::kForward, inputs[0], 0, inputs[1], 1, block,
                  ChannelBlocking::make(ChannelBlocking::kEach, {0}, {0}));
}

ChannelBlocking ConvBiasReluOp::channel_blocking(const std::vector<Shape>& inputs,
                                                 int block) const {
  return blocking(ConvDirection::kForward, inputs[0], 0, inputs[1], 1, block,
                  ChannelBlocking::make(ChannelBlocking::kEach, {0}, {0}));
}

ChannelBlocking ConvGradDataOp::channel_blocking(const std::vector<Shape>& inputs,
                                                 int block) const {
  return blocking(ConvDirection::kBackwardData, inputs[2], 2, inputs[1], 1, block,
                  ChannelBlocking::make(ChannelBlocking::kEach, {0}, {0}, {2}));  // x: shape only
}

ChannelBlocking ConvGradWeightOp::channel_blocking(const std::vector<Shape>& inputs,
                                                   int block) const {
  return blocking(ConvDirection::kBackwardWeights, inputs[1], 1, inputs[2], 2, block,
                  ChannelBlocking::make(ChannelBlocking::kEach, {0, 1}, {}));
}

std::vector<Shape> ConvOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  ConvGeometry g = geometry(inputs[0], 0, inputs[1], 1);
  return {Shape{g.n, g.o, g.ho, g.wo}};
}

GradientSpec ConvOp::gradient() const {
  GradientSpec spec;
  spec.ops.push_back(
      {ConvGradDataOp::kType, attrs_, {output_grad(0), input(1), input(0)}, {input_grad(0)}});
  spec.ops.push_back(
      {ConvGradWeightOp::kType, attrs_, {output_grad(0), input(0), input(1)}, {input_grad(1)}});
  return spec;
}

void ConvOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                         const std::vector<Tensor*>& outputs, OpContext&) {
  ConvGeometry g = geometry(inputs[0]->shape(), 0, inputs[1]->shape(), 1);
  if (outputs[0]->count() == 0) return;
  kernel(ConvDirection::kForward, g, false,
         {inputs[0]->channel_block(), 0, outputs[0]->channel_block()})
      .run(inputs[0]->data(), inputs[1]->data(), nullptr, outputs[0]->mutable_data());
}

std::vector<Shape> ConvBiasReluOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  ConvGeometry g = geometry(inputs[0], 0, inputs[1], 1);
  const Shape expected{g.o};
  require(inputs[2] == expected, type(), ": input 2 (bias) has shape ", inputs[2], ", expected ",
          expected, " (the outputs of input 1, shape ", inputs[1], ")");
  return {Shape{g.n, g.o, g.ho, g.wo}};
}

GradientSpec ConvBiasReluOp::gradient() const {
  // The unfused chain's gradients in the order autodiff makes them for it (relu and bias in
  // one op, then conv), so fused and unfused graphs compute the same floats.
  GradientSpec spec;
  spec.ops.push_back(
      {BiasReluGradOp::kType, {}, {output(0), output_grad(0)}, {temp(0), input_grad(2)}});
  spec.ops.push_back(
      {ConvGradDataOp::kType, attrs_, {temp(0), input(1), input(0)}, {input_grad(0)}});
  spec.ops.push_back(
      {ConvGradWeightOp::kType, attrs_, {temp(0), input(0), input(1)}, {input_grad(1)}});
  return spec;
}

void ConvBiasReluOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                 const std::vector<Tensor*>& outputs, OpContext&) {
  ConvGeometry g = geometry(inputs[0]->shape(), 0, inputs[1]->shape(), 1);
  if (outputs[0]->count() == 0) return;
  kernel(ConvDirection::kForward, g, /*bias_relu=*/true,
         {inputs[0]->channel_block(), 0, outputs[0]->channel_block()})
      .run(inputs[0]->data(), inputs[1]->data(), inputs[2]->data(), outputs[0]->mutable_data());
}

namespace {
void require_dy(const std::string& type, const Shape& dy, const ConvGeometry& g) {
  const Shape expected{g.n, g.o, g.ho, g.wo};
  require(dy == expected, type, ": input 0 (dy) has shape ", dy, ", expected ", expected);
}
}  // namespace

std::vector<Shape> ConvGradDataOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  ConvGeometry g = geometry(inputs[2], 2, inputs[1], 1);
  require_dy(type(), inputs[0], g);
  return {inputs[2]};
}

void ConvGradDataOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                 const std::vector<Tensor*>& outputs, OpContext&) {
  ConvGeometry g = geometry(inputs[2]->shape(), 2, inputs[1]->shape(), 1);
  if (outputs[0]->count() == 0) return;
  kernel(ConvDirection::kBackwardData, g, false,
         {inputs[0]->channel_block(), 0, outputs[0]->channel_block()})
      .run(inputs[0]->data(), inputs[1]->data(), nullptr, outputs[0]->mutable_data());
}

std::vector<Shape> ConvGradWeightOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  ConvGeometry g = geometry(inputs[1], 1, inputs[2], 2);
  require_dy(type(), inputs[0], g);
  return {inputs[2]};
}

void ConvGradWeightOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                   const std::vector<Tensor*>& outputs, OpContext&) {
  ConvGeometry g = geometry(inputs[1]->shape(), 1, inputs[2]->shape(), 2);
  if (outputs[0]->count() == 0) return;
  kernel(ConvDirection::kBackwardWeights, g, false,
         {inputs[0]->channel_block(), inputs[1]->channel_block(), 0})
      .run(inputs[0]->data(), inputs[1]->data(), nullptr, outputs[0]->mutable_data());
}

PURINE_REGISTER_OPERATOR(ConvOp);
PURINE_REGISTER_OPERATOR(ConvBiasReluOp);
PURINE_REGISTER_OPERATOR(ConvGradDataOp);
PURINE_REGISTER_OPERATOR(ConvGradWeightOp);

}  // namespace purine
