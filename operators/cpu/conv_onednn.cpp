// oneDNN's convolution kernels: a primitive per direction and geometry (fused bias and ReLU
// post-ops in the forward), its weight gradient in fixed batch chunks for bits independent of
// the thread count, and the wrapper that feeds plain kernels arguments held in channel blocks.
#include <glog/logging.h>

#include <algorithm>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "base/error.hpp"
#include "operators/cpu/conv_kernel.hpp"
#include "operators/cpu/dnnl_context.hpp"
#include "operators/cpu/thread_workspace.hpp"
#include "operators/cpu/threading.hpp"

namespace purine {
namespace {

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
// argument goes through a plain copy (oneDNN reorders), as oneDNN's kernels reorder what their
// primitives want. For the convolutions whose kernel is not oneDNN's (a stem of 3 input channels,
// small planes) next to blocked activations. The copies live in the calling thread's argument
// workspace, which the ops of a thread share (each op holding its own cost ResNet-50 at batch 16
// 1.1 GB of its peak); the plain kernel takes the kernel workspace meanwhile.
class BlockedArgsKernel : public ConvKernel {
 public:
  BlockedArgsKernel(std::unique_ptr<ConvKernel> plain, ConvDirection direction,
                    const ConvGeometry& g, int threads, bool bias_relu, ConvBlocks blocks)
      : ConvKernel(direction, g, threads, bias_relu, blocks), plain_(std::move(plain)) {
    const dnnl::memory::dims x{g.n, g.c, g.h, g.w}, y{g.n, g.o, g.ho, g.wo};
    const bool forward = direction == ConvDirection::kForward;
    a_ = Copy(forward ? x : y, blocks.a, /*to_plain=*/true, &copies_);
    b_ = Copy(x, direction == ConvDirection::kBackwardWeights ? blocks.b : 0, true, &copies_);
    out_ = Copy(forward ? y : x, direction == ConvDirection::kBackwardWeights ? 0 : blocks.out,
                false, &copies_);
  }

  std::string name() const override { return plain_->name() + " (channel blocks reordered)"; }

  void run(const float* a, const float* b, const float* bias, float* out) override {
    OmpThreads scope(team_);
    char* copies = thread_workspace(copies_.bytes(), Workspace::kArguments);
    float* result = out_.blocked() ? out_.plain(copies) : out;
    plain_->run(a_.to_plain(a, copies), b_.to_plain(b, copies), bias, result);
    if (out_.blocked()) out_.from_plain(out, copies);
  }

 private:
  // One argument: where its plain copy lies in the argument workspace, and the reorder between
  // it and the blocked tensor.
  struct Copy {
    Copy() = default;
    Copy(const dnnl::memory::dims& dims, int block, bool to_plain, WorkspaceLayout* copies) {
      if (block == 0) return;
      using tag = dnnl::memory::format_tag;
      const dnnl::engine& engine = dnnl_context::engine();
      const auto f32 = dnnl::memory::data_type::f32;
      blocked_memory = dnnl::memory({dims, f32, block == 16 ? tag::nChw16c : tag::nChw8c}, engine,
                                    DNNL_MEMORY_NONE);
      plain_memory = dnnl::memory({dims, f32, tag::nchw}, engine, DNNL_MEMORY_NONE);
      at = copies->add(sizeof(float) * dims[0] * dims[1] * dims[2] * dims[3]);
      used = true;
      reorder = to_plain ? dnnl::reorder(blocked_memory, plain_memory)
                         : dnnl::reorder(plain_memory, blocked_memory);
    }
    bool blocked() const { return used; }
    float* plain(char* copies) const { return workspace_floats(copies, at); }
    const float* to_plain(const float* blocked, char* copies) {
      if (!used) return blocked;
      blocked_memory.set_data_handle(const_cast<float*>(blocked));
      plain_memory.set_data_handle(plain(copies));
      reorder.execute(dnnl_context::stream(), blocked_memory, plain_memory);
      dnnl_context::stream().wait();
      return plain(copies);
    }
    void from_plain(float* blocked, char* copies) {
      blocked_memory.set_data_handle(blocked);
      plain_memory.set_data_handle(plain(copies));
      reorder.execute(dnnl_context::stream(), plain_memory, blocked_memory);
      dnnl_context::stream().wait();
    }
    bool used = false;
    size_t at = 0;  // in the argument workspace
    dnnl::memory blocked_memory, plain_memory;
    dnnl::reorder reorder;
  };

  std::unique_ptr<ConvKernel> plain_;
  WorkspaceLayout copies_;
  Copy a_, b_, out_;
};

}  // namespace

std::unique_ptr<ConvKernel> make_onednn_kernel(bool deterministic, ConvDirection direction,
                                               const ConvGeometry& g, int threads, bool bias_relu,
                                               ConvBlocks blocks) {
  if (direction == ConvDirection::kBackwardWeights && deterministic)
    return std::make_unique<ChunkedDnnlWeightGradKernel>(g, threads, blocks);
  return std::make_unique<DnnlConvKernel>(direction, g, threads, bias_relu, blocks);
}

std::unique_ptr<ConvKernel> make_blocked_args_kernel(std::unique_ptr<ConvKernel> plain,
                                                     ConvDirection direction, const ConvGeometry& g,
                                                     int threads, bool bias_relu,
                                                     ConvBlocks blocks) {
  return std::make_unique<BlockedArgsKernel>(std::move(plain), direction, g, threads, bias_relu,
                                             blocks);
}

}  // namespace purine
