#include "operators/batch_norm.hpp"

#include <algorithm>
#include <cmath>

#include "base/error.hpp"
#include "operators/cpu/channel_blocks.hpp"
#include "operators/cpu/channel_sums.hpp"
#include "operators/cpu/isa_loops.hpp"
#include "operators/formulas.hpp"
#include "operators/registry.hpp"

namespace purine {

using cpu::ChannelBlocks;
using cpu::row_dot_centered;
using cpu::row_square_sum;
using cpu::row_sum;
using cpu::workspace_doubles;

BatchNormParams::BatchNormParams(const Attrs& attrs, const char* type)
    : eps(static_cast<float>(attrs.get_float("eps", 1e-5))),
      momentum(static_cast<float>(attrs.get_float("momentum", 0.9))) {
  const std::string mode = attrs.get_string("mode", "train");
  require(mode == "train" || mode == "test", type, ": mode is '", mode,
          "', expected 'train' or 'test'");
  training = mode == "train";
}

BatchNormFamily::BatchNormFamily(Attrs attrs, const char* type)
    : Operator(std::move(attrs)), params_(attrs_, type) {}

ChannelBlocking BatchNormFamily::channel_blocking(const std::vector<Shape>& inputs,
                                                  int block) const {
  ChannelBlocking blocking = cpu::uniform_channel_blocks(block, {0}, {0});
  if (blocking.kind == ChannelBlocking::kNone) return blocking;
  // The gradients (three outputs: dx, dgamma, dbeta) read dy last, after batch_norm_relu's y.
  if (num_outputs() == 3) {
    for (int i = 4; i < static_cast<int>(inputs.size()); ++i) blocking.inputs.push_back(i);
  }
  return blocking;
}

namespace {

// Checks x [N, C, ...] and the per-channel inputs named in `names` (at input positions 1, 2,
// ...); returns C.
int64_t check_channels(const std::string& type, const std::vector<Shape>& inputs,
                       const std::vector<const char*>& names) {
  const Shape& x = inputs[0];
  require(x.ndim() >= 2, type, ": input 0 (x) has shape ", x,
          ", expected rank 2 or more ([N, C] or [N, C, H, W])");
  for (size_t i = 0; i < names.size(); ++i) {
    require(inputs[i + 1] == Shape{x[1]}, type, ": input ", i + 1, " (", names[i], ") has shape ",
            inputs[i + 1], ", expected [", x[1], "] (the channels of x ", x, ")");
  }
  return x[1];
}

// batch_norm's and batch_norm_relu's output shapes.
std::vector<Shape> batch_norm_shapes(const BatchNormFamily& op, const std::vector<Shape>& inputs) {
  const bool train = op.params().training;
  const int64_t c =
      check_channels(op.type(), inputs, {"gamma", "beta", "running_mean", "running_var"});
  const int64_t m = inputs[0].count() / std::max<int64_t>(c, 1);
  require(!train || m > 1 || c == 0, op.type(),
          ": training needs more than one value per channel; input 0 (x) has shape ", inputs[0],
          " (use mode 'test' or a larger batch)");
  return {inputs[0], Shape{c}, Shape{c}, Shape{c}, Shape{c}};
}

}  // namespace

std::vector<Shape> BatchNormOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 5);
  return batch_norm_shapes(*this, inputs);
}

GradientSpec BatchNormOp::gradient() const {
  GradientSpec spec;
  spec.ops.push_back({BatchNormGradOp::kType,
                      attrs_,
                      {input(0), input(1), output(1), output(2), output_grad(0)},
                      {input_grad(0), input_grad(1), input_grad(2)}});
  return spec;
}

namespace {

// The kernels run a copy compiled for AVX2 where the CPU has it (isa_loops.hpp; this file builds
// with -ffp-contract=off). Each channel's sums keep channel_sums.hpp's order of eight lanes
// whatever the vector width, so every copy gives the same bits. Measured on 2 Zen 5 cores
// (2026-11-28, five alternating traced training pairs, resnet20's 19 batch norms both ways per
// iteration): the baseline alone 12.3 / 10.9 / 12.4 / 13.4 / 13.9 ms, with the AVX2 copy 10.7 /
// 9.3 / 10.7 / 12.7 / 12.5.

// batch_norm's kernel, or batch_norm_relu's with `relu`.
void batch_norm_forward(const BatchNormParams& p, const std::vector<const Tensor*>& inputs,
                        const std::vector<Tensor*>& outputs, bool relu) {
  const bool train = p.training;
  const float eps = p.eps, momentum = p.momentum;
  const Shape& shape = inputs[0]->shape();
  const int64_t n = shape[0], channels = shape[1], inner = shape.count_from(2);
  const int64_t m = n * inner;
  const float* x = inputs[0]->data();
  const float* gamma = inputs[1]->data();
  const float* beta = inputs[2]->data();
  const float* running_mean = inputs[3]->data();
  const float* running_var = inputs[4]->data();
  float* y = outputs[0]->mutable_data();
  float* saved_mean = outputs[1]->mutable_data();
  float* saved_inv_std = outputs[2]->mutable_data();
  float* new_mean = outputs[3]->mutable_data();
  float* new_var = outputs[4]->mutable_data();

  const auto channel = [&](int64_t c) __attribute__((always_inline)) {
    float mean, var;
    const float old_mean = running_mean[c], old_var = running_var[c];
    if (train) {
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += row_sum(x + (i * channels + c) * inner, inner);
      mean = static_cast<float>(sum / static_cast<double>(m));
      double squares = 0;
      for (int64_t i = 0; i < n; ++i) {
        squares += row_square_sum(x + (i * channels + c) * inner, inner, mean);
      }
      var = static_cast<float>(squares / static_cast<double>(m));
      const float unbiased = static_cast<float>(squares / static_cast<double>(m - 1));
      new_mean[c] = momentum * old_mean + (1.0f - momentum) * mean;
      new_var[c] = momentum * old_var + (1.0f - momentum) * unbiased;
    } else {
      mean = old_mean;
      var = old_var;
      new_mean[c] = old_mean;
      new_var[c] = old_var;
    }
    const float inv_std = 1.0f / std::sqrt(var + eps);
    saved_mean[c] = mean;
    saved_inv_std[c] = inv_std;
    const formula::BatchNormAffine affine(gamma[c], beta[c], mean, inv_std);
    for (int64_t i = 0; i < n; ++i) {
      const float* in = x + (i * channels + c) * inner;
      float* out = y + (i * channels + c) * inner;
      if (relu) {  // relu's formula: the unfused chain's bits
        for (int64_t s = 0; s < inner; ++s) out[s] = formula::Relu()(affine(in[s]));
      } else {
        for (int64_t s = 0; s < inner; ++s) out[s] = affine(in[s]);
      }
    }
  };
  parallel_for_isa(channels, m * channels > kParallelMinArithmetic, channel);
}

void batch_norm_forward_blocked(const BatchNormParams& p, const std::vector<const Tensor*>& inputs,
                                const std::vector<Tensor*>& outputs, bool relu) {
  const ChannelBlocks e(*inputs[0]);
  const int64_t channels = e.channels, m = e.n * e.inner;
  const bool parallel = m * channels > kParallelMinArithmetic;
  const float* x = inputs[0]->data();
  const float* gamma = inputs[1]->data();
  const float* beta = inputs[2]->data();
  const float* running_mean = inputs[3]->data();
  const float* running_var = inputs[4]->data();
  float* y = outputs[0]->mutable_data();
  float* saved_mean = outputs[1]->mutable_data();
  float* saved_inv_std = outputs[2]->mutable_data();
  float* new_mean = outputs[3]->mutable_data();
  float* new_var = outputs[4]->mutable_data();
  // Per-image sums [N C], their per-channel sums [C], the variances [C]; then the scales and
  // shifts over the per-image sums, once those are added up.
  double* total = workspace_doubles((e.n + 2) * channels);
  double* sums = total + e.n * channels;
  float* var = reinterpret_cast<float*>(sums + channels);
  float* scale = reinterpret_cast<float*>(total);
  float* shift = scale + channels;
  for (int64_t c = 0; c < channels; ++c) {  // mode test: the running statistics
    saved_mean[c] = running_mean[c];
    new_mean[c] = running_mean[c];
    new_var[c] = running_var[c];
    var[c] = running_var[c];
  }
  if (p.training) {
    e.image_sums(parallel, total, [&](int64_t base, int64_t k, int64_t) { return x[base + k]; });
    e.add_images(total, sums);
    for (int64_t c = 0; c < channels; ++c)
      saved_mean[c] = static_cast<float>(sums[c] / static_cast<double>(m));
    e.image_sums(parallel, total, [&](int64_t base, int64_t k, int64_t c) {
      const float d = x[base + k] - saved_mean[c];
      return d * d;
    });
    e.add_images(total, sums);
    for (int64_t c = 0; c < channels; ++c) {
      const float unbiased = static_cast<float>(sums[c] / static_cast<double>(m - 1));
      new_mean[c] = p.momentum * running_mean[c] + (1.0f - p.momentum) * saved_mean[c];
      new_var[c] = p.momentum * running_var[c] + (1.0f - p.momentum) * unbiased;
      var[c] = static_cast<float>(sums[c] / static_cast<double>(m));
    }
  }
  for (int64_t c = 0; c < channels; ++c) {  // scale and shift as BatchNormAffine makes them
    saved_inv_std[c] = 1.0f / std::sqrt(var[c] + p.eps);
    const formula::BatchNormAffine affine(gamma[c], beta[c], saved_mean[c], saved_inv_std[c]);
    scale[c] = affine.scale;
    shift[c] = affine.shift;
  }
  if (relu) {  // relu's formula: the unfused chain's bits
    e.each(parallel,
           [&](int64_t k, int64_t c) { y[k] = formula::Relu()(x[k] * scale[c] + shift[c]); });
  } else {
    e.each(parallel, [&](int64_t k, int64_t c) { y[k] = x[k] * scale[c] + shift[c]; });
  }
}

// batch_norm_grad's kernel of (x, gamma, saved_mean, saved_inv_std, dy), or with `y`
// batch_norm_relu_grad's: dy masked where y is not positive first.
void batch_norm_backward(const BatchNormParams& p, const std::vector<const Tensor*>& inputs,
                         const float* y, const float* dy, const std::vector<Tensor*>& outputs) {
  const bool train = p.training;
  const Shape& shape = inputs[0]->shape();
  const int64_t n = shape[0], channels = shape[1], inner = shape.count_from(2);
  const double m = static_cast<double>(n * inner);
  const float* x = inputs[0]->data();
  const float* gamma = inputs[1]->data();
  const float* saved_mean = inputs[2]->data();
  const float* saved_inv_std = inputs[3]->data();
  float* dx = outputs[0]->mutable_data();
  float* dgamma = outputs[1]->mutable_data();
  float* dbeta = outputs[2]->mutable_data();

  const auto channel = [&](int64_t c) __attribute__((always_inline)) {
    // With a ReLU, its gradient goes into this channel's rows of dx (relu_grad's expression,
    // cpu/activation.cpp), each row summed while it is in L1, and dx's pass then reads them as
    // the unfused op reads its dy: the same floats.
    const float* g = y ? dx : dy;
    const float mean = saved_mean[c], inv_std = saved_inv_std[c];
    double sum_dy = 0, sum_dy_centered = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t offset = (i * channels + c) * inner;
      if (y) {
        for (int64_t s = 0; s < inner; ++s) {
          // dy loaded before the select: a blend, not a branch
          dx[offset + s] = formula::ReluGrad()(y[offset + s], dy[offset + s]);
        }
      }
      sum_dy += row_sum(g + offset, inner);
      sum_dy_centered += row_dot_centered(g + offset, x + offset, inner, mean);
    }
    // dgamma = sum(dy xhat) = inv_std sum(dy (x - mean))
    const float dg = static_cast<float>(sum_dy_centered) * inv_std;
    dgamma[c] = dg;
    dbeta[c] = static_cast<float>(sum_dy);
    const float scale = gamma[c] * inv_std;
    // train: dx = scale (dy - sum_dy / M - (x - mean) inv_std * dg / M)
    const float mean_dy = train && m > 0 ? static_cast<float>(sum_dy / m) : 0.0f;
    const float slope = train && m > 0 ? static_cast<float>(dg * inv_std / m) : 0.0f;
    const auto gradient = [&](float d, float in) {
      return scale * (d - mean_dy - (in - mean) * slope);
    };
    for (int64_t i = 0; i < n; ++i) {
      const int64_t offset = (i * channels + c) * inner;
      const float* in = x + offset;
      float* out = dx + offset;
      if (y) {  // in place: a loop over dy and dx would see them overlap and not vectorize
        for (int64_t s = 0; s < inner; ++s) out[s] = gradient(out[s], in[s]);
      } else {
        const float* d = dy + offset;
        for (int64_t s = 0; s < inner; ++s) out[s] = gradient(d[s], in[s]);
      }
    }
  };
  parallel_for_isa(channels, n * inner * channels > kParallelMinArithmetic, channel);
}

// batch_norm_backward for tensors in channel blocks (ChannelBlocks above).
void batch_norm_backward_blocked(const BatchNormParams& p, const std::vector<const Tensor*>& inputs,
                                 const float* y, const float* dy,
                                 const std::vector<Tensor*>& outputs) {
  const ChannelBlocks e(*inputs[0]);
  const int64_t channels = e.channels;
  const double m = static_cast<double>(e.n * e.inner);
  const bool parallel = e.n * e.inner * channels > kParallelMinArithmetic;
  const float* x = inputs[0]->data();
  const float* gamma = inputs[1]->data();
  const float* mean = inputs[2]->data();
  const float* saved_inv_std = inputs[3]->data();
  float* dx = outputs[0]->mutable_data();
  float* dgamma = outputs[1]->mutable_data();
  float* dbeta = outputs[2]->mutable_data();
  double* total = workspace_doubles(2 * (e.n + 1) * channels);
  double* centered_total = total + e.n * channels;
  double* sum_dy = centered_total + e.n * channels;
  double* sum_centered = sum_dy + channels;
  // With a ReLU, its gradient goes into dx first (relu_grad's expression), which the sums and
  // dx's pass then read as the unfused op reads its dy.
  const float* g = y ? dx : dy;
  if (y) e.each(parallel, [&](int64_t k, int64_t) { dx[k] = formula::ReluGrad()(y[k], dy[k]); });
  e.image_sums(parallel, total, [&](int64_t base, int64_t k, int64_t) { return g[base + k]; });
  e.image_sums(parallel, centered_total, [&](int64_t base, int64_t k, int64_t c) {
    return g[base + k] * (x[base + k] - mean[c]);
  });
  e.add_images(total, sum_dy);
  e.add_images(centered_total, sum_centered);
  float* scale = reinterpret_cast<float*>(total);  // over the per-image sums, added up
  float* mean_dy = scale + channels;
  float* slope = mean_dy + channels;
  for (int64_t c = 0; c < channels; ++c) {
    const float inv_std = saved_inv_std[c];
    const float dg = static_cast<float>(sum_centered[c]) * inv_std;
    dgamma[c] = dg;
    dbeta[c] = static_cast<float>(sum_dy[c]);
    scale[c] = gamma[c] * inv_std;
    mean_dy[c] = p.training && m > 0 ? static_cast<float>(sum_dy[c] / m) : 0.0f;
    slope[c] = p.training && m > 0 ? static_cast<float>(dg * inv_std / m) : 0.0f;
  }
  e.each(parallel, [&](int64_t k, int64_t c) {
    dx[k] = scale[c] * (g[k] - mean_dy[c] - (x[k] - mean[c]) * slope[c]);
  });
}

void batch_norm_forward_any(const BatchNormParams& p, const std::vector<const Tensor*>& inputs,
                            const std::vector<Tensor*>& outputs, bool relu) {
  if (inputs[0]->channel_block() > 0) {
    batch_norm_forward_blocked(p, inputs, outputs, relu);
  } else {
    batch_norm_forward(p, inputs, outputs, relu);
  }
}

void batch_norm_backward_any(const BatchNormParams& p, const std::vector<const Tensor*>& inputs,
                             const float* y, const float* dy, const std::vector<Tensor*>& outputs) {
  if (inputs[0]->channel_block() > 0) {
    batch_norm_backward_blocked(p, inputs, y, dy, outputs);
  } else {
    batch_norm_backward(p, inputs, y, dy, outputs);
  }
}

}  // namespace

void BatchNormOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                              const std::vector<Tensor*>& outputs, OpContext&) {
  batch_norm_forward_any(params(), inputs, outputs, false);
}

std::vector<Shape> BatchNormGradOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 3);
  const int64_t c = check_channels(type(), inputs, {"gamma", "saved_mean", "saved_inv_std"});
  require(inputs[4] == inputs[0], type(), ": input 4 (dy) has shape ", inputs[4],
          ", expected input 0's (x) shape ", inputs[0]);
  return {inputs[0], Shape{c}, Shape{c}};
}

void BatchNormGradOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                  const std::vector<Tensor*>& outputs, OpContext&) {
  batch_norm_backward_any(params(), inputs, nullptr, inputs[4]->data(), outputs);
}

std::vector<Shape> BatchNormReluOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 5);
  return batch_norm_shapes(*this, inputs);
}

GradientSpec BatchNormReluOp::gradient() const {
  GradientSpec spec;
  spec.ops.push_back({BatchNormReluGradOp::kType,
                      attrs_,
                      {input(0), input(1), output(1), output(2), output(0), output_grad(0)},
                      {input_grad(0), input_grad(1), input_grad(2)}});
  return spec;
}

void BatchNormReluOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                  const std::vector<Tensor*>& outputs, OpContext&) {
  batch_norm_forward_any(params(), inputs, outputs, true);
}

std::vector<Shape> BatchNormReluGradOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 3);
  const int64_t c = check_channels(type(), inputs, {"gamma", "saved_mean", "saved_inv_std"});
  for (int i : {4, 5}) {
    require(inputs[i] == inputs[0], type(), ": input ", i, i == 4 ? " (y)" : " (dy)", " has shape ",
            inputs[i], ", expected input 0's (x) shape ", inputs[0]);
  }
  return {inputs[0], Shape{c}, Shape{c}};
}

void BatchNormReluGradOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                      const std::vector<Tensor*>& outputs, OpContext&) {
  batch_norm_backward_any(params(), inputs, inputs[4]->data(), inputs[5]->data(), outputs);
}

PURINE_REGISTER_OPERATOR(BatchNormOp);
PURINE_REGISTER_OPERATOR(BatchNormGradOp);
PURINE_REGISTER_OPERATOR(BatchNormReluOp);
PURINE_REGISTER_OPERATOR(BatchNormReluGradOp);

}  // namespace purine
