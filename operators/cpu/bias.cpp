#include "operators/bias.hpp"

#include <string>

#include "base/error.hpp"
#include "operators/cpu/channel_blocks.hpp"
#include "operators/cpu/fused_parts.hpp"
#include "operators/cpu/plane_sums.hpp"
#include "operators/cpu/thread_workspace.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/formulas.hpp"
#include "operators/registry.hpp"

namespace purine {

namespace {

// Sum of n floats in a fixed order: eight interleaved partial sums (which the compiler keeps in
// one vector register), then those eight in order.
float sum_floats(const float* p, int64_t n) {
  float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] += p[i + l];
  }
  for (int l = 0; i < n; ++i, ++l) lanes[l] += p[i];
  float total = 0;
  for (int l = 0; l < 8; ++l) total += lanes[l];
  return total;
}

// bias and bias_relu: y has x's shape, b one value per channel (axis 1).
std::vector<Shape> bias_shapes(const std::string& type, const std::vector<Shape>& inputs) {
  const Shape& x = inputs[0];
  const Shape& b = inputs[1];
  require(x.ndim() >= 2, type, ": input 0 (x) has shape ", x,
          ", expected rank 2 or more ([N, C, ...])");
  require(b == Shape{x[1]}, type, ": input 1 (bias) has shape ", b, ", expected [", x[1],
          "] (the channels of input 0, shape ", x, ")");
  return {x};
}

// y = f(x + b), b broadcast along axis 1.
template <typename F>
void add_bias(const Tensor& x_tensor, const Tensor& b_tensor, Tensor& y_tensor, F f) {
  const Shape& shape = x_tensor.shape();
  const int64_t n = shape[0];
  const int64_t c = shape[1];
  const int64_t inner = shape.count_from(2);
  const float* x = x_tensor.data();
  const float* b = b_tensor.data();
  float* y = y_tensor.mutable_data();
  if (inner == 1) {  // [N, C]: add the bias row to every sample
    parallel_for(n, n * c > kParallelMinArithmetic, [&](int64_t i) {
      const float* xr = x + i * c;
      float* yr = y + i * c;
      for (int64_t j = 0; j < c; ++j) yr[j] = f(xr[j] + b[j]);
    });
    return;
  }
  const int64_t planes = n * c;
  parallel_for(planes, planes * inner > kParallelMinArithmetic, [&](int64_t p) {
    const float v = b[p % c];
    const float* xp = x + p * inner;
    float* yp = y + p * inner;
    for (int64_t j = 0; j < inner; ++j) yp[j] = f(xp[j] + v);
  });
}

// db[c] = the sum of d over every axis but 1, samples in order and each plane by sum_floats,
// so that any thread count gives the same bits.
void sum_channels(const Shape& shape, const float* d, float* db) {
  const int64_t n = shape[0];
  const int64_t c = shape[1];
  const int64_t inner = shape.count_from(2);
  if (inner == 1) {  // [N, C]: accumulate rows in order; vectorized across channels
    for (int64_t j = 0; j < c; ++j) db[j] = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* row = d + i * c;
      for (int64_t j = 0; j < c; ++j) db[j] += row[j];
    }
    return;
  }
  if (inner <= kMaxSummedPlane) {  // small planes: L channels at a time, the same bits
    sum_small_planes(n, c, inner, d, db);
    return;
  }
  // One channel per iteration.
  parallel_for(c, n * c * inner > kParallelMinArithmetic, [&](int64_t j) {
    float total = 0;
    for (int64_t i = 0; i < n; ++i) total += sum_floats(d + (i * c + j) * inner, inner);
    db[j] = total;
  });
}

// sum_channels of d in channel blocks: each image's planes summed as sum_floats sums them
// (ChannelBlocks), then the images in order: the same bits.
void sum_channels_blocked(const Tensor& d_tensor, const float* d, float* db) {
  const cpu::ChannelBlocks e(d_tensor);
  float* per_image = reinterpret_cast<float*>(thread_workspace(sizeof(float) * e.n * e.channels));
  e.image_sums(e.n * e.image() > kParallelMinArithmetic, per_image,
               [&](int64_t base, int64_t k, int64_t) { return d[base + k]; });
  e.add_images(per_image, db);
}

// sum_channels of the tensor `d_tensor` whose data is d, plain or in blocks.
void sum_channels_any(const Tensor& d_tensor, const float* d, float* db) {
  if (d_tensor.channel_block() > 0) {
    sum_channels_blocked(d_tensor, d, db);
  } else {
    sum_channels(d_tensor.shape(), d, db);
  }
}

}  // namespace

void add_bias_cpu(const Tensor& x, const Tensor& b, Tensor& y, bool relu) {
  if (relu) {
    add_bias(x, b, y, formula::Relu());  // relu's formula: the unfused chain's bits
  } else {
    add_bias(x, b, y, [](float v) { return v; });
  }
}

std::vector<Shape> BiasOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  return bias_shapes(type(), inputs);
}

GradientSpec BiasOp::gradient() const {
  GradientSpec spec;
  spec.aliases.push_back({0, 0});
  spec.ops.push_back({BiasGradOp::kType, {}, {output_grad(0)}, {input_grad(1)}});
  return spec;
}

void BiasOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                         const std::vector<Tensor*>& outputs, OpContext&) {
  add_bias_cpu(*inputs[0], *inputs[1], *outputs[0], false);
}

std::vector<Shape> BiasReluOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  return bias_shapes(type(), inputs);
}

GradientSpec BiasReluOp::gradient() const {
  GradientSpec spec;
  spec.ops.push_back(
      {BiasReluGradOp::kType, {}, {output(0), output_grad(0)}, {input_grad(0), input_grad(1)}});
  return spec;
}

void BiasReluOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                             const std::vector<Tensor*>& outputs, OpContext&) {
  add_bias_cpu(*inputs[0], *inputs[1], *outputs[0], true);
}

std::vector<Shape> BiasGradOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  require(inputs[0].ndim() >= 2, type(), ": input 0 (dy) has shape ", inputs[0],
          ", expected rank 2 or more ([N, C, ...])");
  return {Shape{inputs[0][1]}};
}

ChannelBlocking BiasGradOp::channel_blocking(const std::vector<Shape>&, int block) const {
  return cpu::uniform_channel_blocks(block, {0}, {});
}

void BiasGradOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                             const std::vector<Tensor*>& outputs, OpContext&) {
  sum_channels_any(*inputs[0], inputs[0]->data(), outputs[0]->mutable_data());
}

std::vector<Shape> BiasReluGradOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 2);
  require(inputs[0].ndim() >= 2, type(), ": input 0 (y) has shape ", inputs[0],
          ", expected rank 2 or more ([N, C, ...])");
  require(inputs[1] == inputs[0], type(), ": input 1 (dy) has shape ", inputs[1],
          ", expected input 0's (y) shape ", inputs[0]);
  return {inputs[0], Shape{inputs[0][1]}};
}

ChannelBlocking BiasReluGradOp::channel_blocking(const std::vector<Shape>&, int block) const {
  return cpu::uniform_channel_blocks(block, {0, 1}, {0});
}

void BiasReluGradOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                 const std::vector<Tensor*>& outputs, OpContext&) {
  const float* y = inputs[0]->data();
  const float* dy = inputs[1]->data();
  float* dx = outputs[0]->mutable_data();
  // relu_grad's pass, then bias_grad's over its result: on the CPU faster than one pass that
  // sums each plane as it writes it (channel by channel, strided), and the same floats. Also
  // faster for small planes than one pass over blocks of channels image by image (GoogLeNet-28's
  // 57 ops, 2 Zen 5 cores, 2026-11-28, two alternating traced pairs: 1.88 / 1.92 ms against
  // 2.21 / 2.18), whose three strided streams the prefetchers follow worse.
  const int64_t n = inputs[0]->count();
  parallel_for(n, n > kParallelMinArithmetic, [&](int64_t i) {
    dx[i] = formula::ReluGrad()(y[i], dy[i]);  // dy loaded first: a vectorized blend
  });
  sum_channels_any(*outputs[0], dx, outputs[1]->mutable_data());
}

PURINE_REGISTER_OPERATOR(BiasOp);
PURINE_REGISTER_OPERATOR(BiasReluOp);
PURINE_REGISTER_OPERATOR(BiasGradOp);
PURINE_REGISTER_OPERATOR(BiasReluGradOp);

}  // namespace purine
