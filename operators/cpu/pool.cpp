#include "operators/pool.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "base/error.hpp"
#include "operators/cpu/masked.hpp"
#include "operators/cpu/pool_blocks.hpp"
#include "operators/cpu/pool_lanes.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/registry.hpp"

namespace purine {

namespace {

// Offset in the plane of the first maximum of the window (never empty: pad < kernel).
inline int64_t argmax(const PoolGeometry& g, const float* x, const PoolWindow& win) {
  int64_t best = win.h0 * g.w + win.w0;
  float m = x[best];
  for (int64_t h = win.h0; h < win.h1; ++h) {
    for (int64_t w = win.w0; w < win.w1; ++w) {
      if (x[h * g.w + w] > m) {
        m = x[h * g.w + w];
        best = h * g.w + w;
      }
    }
  }
  return best;
}

// One plane of pooling.
void pool_plane(const PoolGeometry& g, const float* x, float* y) {
  if (is_max_2x2(g)) {  // the common case, written so that it vectorizes
    for (int64_t oh = 0; oh < g.ho; ++oh) {
      const float* r0 = x + 2 * oh * g.w;
      const float* r1 = r0 + g.w;
      float* out = y + oh * g.wo;
      for (int64_t ow = 0; ow < g.wo; ++ow) {
        // The window in row-major order, a later value kept only when greater (as argmax()).
        float m = r0[2 * ow];
        m = r0[2 * ow + 1] > m ? r0[2 * ow + 1] : m;
        m = r1[2 * ow] > m ? r1[2 * ow] : m;
        out[ow] = r1[2 * ow + 1] > m ? r1[2 * ow + 1] : m;
      }
    }
    return;
  }
  const float inv_area = 1.0f / static_cast<float>(g.kernel_h * g.kernel_w);
  for (int64_t oh = 0; oh < g.ho; ++oh) {
    for (int64_t ow = 0; ow < g.wo; ++ow) {
      const PoolWindow win = pool_window(g, oh, ow);
      if (g.max) {
        y[oh * g.wo + ow] = x[argmax(g, x, win)];
      } else {
        float sum = 0;
        for (int64_t h = win.h0; h < win.h1; ++h) {
          for (int64_t w = win.w0; w < win.w1; ++w) sum += x[h * g.w + w];
        }
        y[oh * g.wo + ow] = sum * inv_area;
      }
    }
  }
}

// One plane of the gradient: dx from x and dy.
void pool_grad_plane(const PoolGeometry& g, const float* x, const float* dy, float* dx) {
  if (is_max_2x2(g)) {  // disjoint windows: each dx element is written once
    for (int64_t oh = 0; oh < g.ho; ++oh) {
      const float* r0 = x + 2 * oh * g.w;
      const float* r1 = r0 + g.w;
      float* d0 = dx + 2 * oh * g.w;
      float* d1 = d0 + g.w;
      const float* grad = dy + oh * g.wo;
      for (int64_t ow = 0; ow < g.wo; ++ow) {
        const float a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
        // The first maximum in row-major order takes the gradient, found as argmax() does (a
        // later value wins only when greater). Bit masks, not branches: on random data the
        // branches mispredict and cost more than all the arithmetic.
        const uint32_t more_b = b > a;
        const float m_ab = more_b ? b : a;
        const uint32_t more_c = c > m_ab;
        const uint32_t more_d = d > (more_c ? c : m_ab);
        const uint32_t take_d = more_d;
        const uint32_t take_c = more_c & (more_d ^ 1u);
        const uint32_t take_b = more_b & ((more_c | more_d) ^ 1u);
        const uint32_t take_a = (more_b | more_c | more_d) ^ 1u;
        const float v = grad[ow];
        d0[2 * ow] = masked(v, take_a);
        d0[2 * ow + 1] = masked(v, take_b);
        d1[2 * ow] = masked(v, take_c);
        d1[2 * ow + 1] = masked(v, take_d);
      }
      // A last column that fills no window (odd width).
      std::fill(d0 + 2 * g.wo, d0 + g.w, 0.0f);
      std::fill(d1 + 2 * g.wo, d1 + g.w, 0.0f);
    }
    std::fill(dx + 2 * g.ho * g.w, dx + g.h * g.w, 0.0f);  // likewise a last row
    return;
  }
  std::fill(dx, dx + g.h * g.w, 0.0f);
  const float inv_area = 1.0f / static_cast<float>(g.kernel_h * g.kernel_w);
  for (int64_t oh = 0; oh < g.ho; ++oh) {
    for (int64_t ow = 0; ow < g.wo; ++ow) {
      const PoolWindow win = pool_window(g, oh, ow);
      const float v = dy[oh * g.wo + ow];
      if (g.max) {
        dx[argmax(g, x, win)] += v;
      } else {
        const float share = v * inv_area;
        for (int64_t h = win.h0; h < win.h1; ++h) {
          for (int64_t w = win.w0; w < win.w1; ++w) dx[h * g.w + w] += share;
        }
      }
    }
  }
}

}  // namespace

PoolParams::PoolParams(const Attrs& attrs, const char* type) {
  const std::string mode = attrs.get_string("mode", "max");
  require(mode == "max" || mode == "avg", type, ": mode is '", mode, "', expected 'max' or 'avg'");
  max = mode == "max";
  const bool has_kernel = attrs.has("kernel") || (attrs.has("kernel_h") && attrs.has("kernel_w"));
  require(has_kernel, type, ": missing attribute 'kernel' (or 'kernel_h' and 'kernel_w')");
  const int64_t kernel = attrs.get_int("kernel", 0);
  kernel_h = attrs.get_int("kernel_h", kernel);
  kernel_w = attrs.get_int("kernel_w", kernel);
  require(kernel_h >= 1 && kernel_w >= 1, type, ": kernel is ", kernel_h, "x", kernel_w,
          ", expected 1 or more");
  const bool has_stride = attrs.has("stride");
  const int64_t stride = attrs.get_int("stride", 0);
  stride_h = attrs.get_int("stride_h", has_stride ? stride : kernel_h);
  stride_w = attrs.get_int("stride_w", has_stride ? stride : kernel_w);
  require(stride_h >= 1 && stride_w >= 1, type, ": stride is ", stride_h, "x", stride_w,
          ", expected 1 or more");
  const int64_t pad = attrs.get_int("pad", 0);
  pad_h = attrs.get_int("pad_h", pad);
  pad_w = attrs.get_int("pad_w", pad);
  require(pad_h >= 0 && pad_w >= 0 && pad_h < kernel_h && pad_w < kernel_w, type, ": pad is ",
          pad_h, "x", pad_w, ", expected 0 or more and less than the kernel ", kernel_h, "x",
          kernel_w);
}

PoolOpBase::PoolOpBase(Attrs attrs, const char* type)
    : Operator(std::move(attrs)), params_(attrs_, type) {}

PoolGeometry PoolOpBase::geometry(const Shape& x) const {
  PoolGeometry g;
  g.max = params_.max;
  g.kernel_h = params_.kernel_h;
  g.kernel_w = params_.kernel_w;
  g.stride_h = params_.stride_h;
  g.stride_w = params_.stride_w;
  g.pad_h = params_.pad_h;
  g.pad_w = params_.pad_w;
  require(x.ndim() == 4, type(), ": input 0 (x) has shape ", x, ", expected [N, C, H, W]");
  g.planes = x[0] * x[1];
  g.h = x[2];
  g.w = x[3];
  require(g.h + 2 * g.pad_h >= g.kernel_h && g.w + 2 * g.pad_w >= g.kernel_w, type(), ": kernel ",
          g.kernel_h, "x", g.kernel_w, " is larger than the padded input ", g.h + 2 * g.pad_h, "x",
          g.w + 2 * g.pad_w, " (input 0 has shape ", x, ")");
  g.ho = (g.h + 2 * g.pad_h - g.kernel_h) / g.stride_h + 1;
  g.wo = (g.w + 2 * g.pad_w - g.kernel_w) / g.stride_w + 1;
  return g;
}

std::vector<Shape> PoolOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  const PoolGeometry g = geometry(inputs[0]);
  return {Shape{inputs[0][0], inputs[0][1], g.ho, g.wo}};
}

GradientSpec PoolOp::gradient() const {
  GradientSpec spec;
  spec.ops.push_back(
      {PoolGradOp::kType, attrs_, {input(0), output(0), output_grad(0)}, {input_grad(0)}});
  return spec;
}

// x and y (and the gradient's dy and dx; its y, only a shape) each in blocks of 8 or 16 channels
// or plain: the kernels turn plain planes into tiles of vectors across channels anyway
// (pool_lanes.cpp), which a block already is. So the pooling before an inner product (which
// reads its input plain) can take its input in blocks.
ChannelBlocking PoolOp::channel_blocking(const std::vector<Shape>&, int block) const {
  if (block % 8 != 0 || block > 16) return {};
  return ChannelBlocking::make(ChannelBlocking::kEach, {0}, {0});
}

ChannelBlocking PoolGradOp::channel_blocking(const std::vector<Shape>&, int block) const {
  if (block % 8 != 0 || block > 16) return {};
  return ChannelBlocking::make(ChannelBlocking::kEach, {0, 2}, {0}, {1});
}

namespace {

// The block of the tensors that have one (all the same), or 0 when all are plain.
int block_of(std::initializer_list<const Tensor*> tensors) {
  int block = 0;
  for (const Tensor* t : tensors) {
    if (t->channel_block() == 0) continue;
    CHECK(block == 0 || block == t->channel_block()) << "pooling over blocks of two sizes";
    block = t->channel_block();
  }
  return block;
}

}  // namespace

void PoolOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                         const std::vector<Tensor*>& outputs, OpContext&) {
  const PoolGeometry g = geometry(inputs[0]->shape());
  const float* x = inputs[0]->data();
  float* y = outputs[0]->mutable_data();
  if (const int block = block_of({inputs[0], outputs[0]})) {
    return pool_blocks(g, inputs[0]->shape()[0], inputs[0]->shape()[1], block, x,
                       inputs[0]->channel_block() > 0, y, outputs[0]->channel_block() > 0);
  }
  const int64_t in_plane = g.h * g.w, out_plane = g.ho * g.wo;
  if (use_pool_lanes(g)) return pool_lanes(g, x, y);
  parallel_for(g.planes, g.planes * in_plane > kParallelMinArithmetic,
               [&](int64_t p) { pool_plane(g, x + p * in_plane, y + p * out_plane); });
}

std::vector<Shape> PoolGradOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  const PoolGeometry g = geometry(inputs[0]);
  const Shape expected{inputs[0][0], inputs[0][1], g.ho, g.wo};
  require(inputs[1] == expected, type(), ": input 1 (y) has shape ", inputs[1], ", expected ",
          expected);
  require(inputs[2] == expected, type(), ": input 2 (dy) has shape ", inputs[2], ", expected ",
          expected);
  return {inputs[0]};
}

void PoolGradOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                             const std::vector<Tensor*>& outputs, OpContext&) {
  const PoolGeometry g = geometry(inputs[0]->shape());
  const float* x = inputs[0]->data();
  const float* dy = inputs[2]->data();
  float* dx = outputs[0]->mutable_data();
  if (const int block = block_of({inputs[0], inputs[2], outputs[0]})) {
    return pool_grad_blocks(g, inputs[0]->shape()[0], inputs[0]->shape()[1], block, x,
                            inputs[0]->channel_block() > 0, dy, inputs[2]->channel_block() > 0, dx,
                            outputs[0]->channel_block() > 0);
  }
  const int64_t in_plane = g.h * g.w, out_plane = g.ho * g.wo;
  if (use_pool_lanes(g)) return pool_grad_lanes(g, x, dy, dx);
  parallel_for(g.planes, g.planes * in_plane > kParallelMinArithmetic, [&](int64_t p) {
    pool_grad_plane(g, x + p * in_plane, dy + p * out_plane, dx + p * in_plane);
  });
}

PURINE_REGISTER_OPERATOR(PoolOp);
PURINE_REGISTER_OPERATOR(PoolGradOp);

}  // namespace purine
