#include "operators/sync_batch_norm.hpp"

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

namespace {

// Checks x [N, C, ...] and returns C.
int64_t channels_of(const std::string& type, const Shape& x) {
  require(x.ndim() >= 2, type, ": input 0 (x) has shape ", x,
          ", expected rank 2 or more ([N, C] or [N, C, H, W])");
  return x[1];
}

// Checks that input `i` (named `name`) has shape `expected`.
void require_shape(const std::string& type, const std::vector<Shape>& inputs, size_t i,
                   const char* name, const Shape& expected) {
  require(inputs[i] == expected, type, ": input ", i, " (", name, ") has shape ", inputs[i],
          ", expected ", expected, " (from the channels of x ", inputs[0], ")");
}

struct Layout {
  int64_t n, channels, inner;
  explicit Layout(const Shape& shape)
      : n(shape[0]), channels(shape[1]), inner(shape.count_from(2)) {}
  int64_t offset(int64_t i, int64_t c) const { return (i * channels + c) * inner; }
  int64_t count() const { return n * channels * inner; }
};

// The blocked kernels' per-channel sums (ChannelBlocks: per-image sums added in image order, the
// plain kernels' bits): out[c] = the sum of f(base, k, c) over channel c (f reads element
// base + k), rounded to float. `workspace` holds (N + 1) C doubles.
template <typename F>
void blocked_channel_sums(const ChannelBlocks& e, bool parallel, double* workspace, F f,
                          float* out) {
  double* sums = workspace + e.n * e.channels;
  e.image_sums(parallel, workspace, f);
  e.add_images(workspace, sums);
  for (int64_t c = 0; c < e.channels; ++c) out[c] = static_cast<float>(sums[c]);
}

}  // namespace

// ---- batch_norm_sums ----

std::vector<Shape> BatchNormSumsOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  return {Shape{channels_of(type(), inputs[0]) + 1}};
}

ChannelBlocking BatchNormSumsOp::channel_blocking(const std::vector<Shape>&, int block) const {
  return cpu::uniform_channel_blocks(block, {0});
}

void BatchNormSumsOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                  const std::vector<Tensor*>& outputs, OpContext&) {
  const Layout l(inputs[0]->shape());
  const float* x = inputs[0]->data();
  float* sums = outputs[0]->mutable_data();
  sums[l.channels] = static_cast<float>(l.n * l.inner);
  const bool parallel = l.count() > kParallelMinArithmetic;
  if (inputs[0]->channel_block() > 0) {
    const ChannelBlocks e(*inputs[0]);
    blocked_channel_sums(
        e, parallel, workspace_doubles((e.n + 1) * e.channels),
        [&](int64_t base, int64_t k, int64_t) { return x[base + k]; }, sums);
    return;
  }
  const auto channel = [&](int64_t c) __attribute__((always_inline)) {
    double sum = 0;
    for (int64_t i = 0; i < l.n; ++i) sum += row_sum(x + l.offset(i, c), l.inner);
    sums[c] = static_cast<float>(sum);
  };
  parallel_for_isa(l.channels, parallel, channel);
}

// ---- batch_norm_square_sums ----

std::vector<Shape> BatchNormSquareSumsOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  const int64_t c = channels_of(type(), inputs[0]);
  require_shape(type(), inputs, 1, "total_sums", Shape{c + 1});
  return {Shape{c + 1}};
}

ChannelBlocking BatchNormSquareSumsOp::channel_blocking(const std::vector<Shape>&,
                                                        int block) const {
  return cpu::uniform_channel_blocks(block, {0});
}

void BatchNormSquareSumsOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                        const std::vector<Tensor*>& outputs, OpContext&) {
  const Layout l(inputs[0]->shape());
  const float* x = inputs[0]->data();
  const float* totals = inputs[1]->data();
  float* squares = outputs[0]->mutable_data();
  const double count = totals[l.channels];
  squares[l.channels] = static_cast<float>(l.n * l.inner);
  const bool parallel = l.count() > kParallelMinArithmetic;
  if (inputs[0]->channel_block() > 0) {
    const ChannelBlocks e(*inputs[0]);
    double* workspace = workspace_doubles((e.n + 2) * e.channels);
    float* mean = reinterpret_cast<float*>(workspace + (e.n + 1) * e.channels);
    for (int64_t c = 0; c < l.channels; ++c) mean[c] = static_cast<float>(totals[c] / count);
    blocked_channel_sums(
        e, parallel, workspace,
        [&](int64_t base, int64_t k, int64_t c) {
          return (x[base + k] - mean[c]) * (x[base + k] - mean[c]);
        },
        squares);
    return;
  }
  const auto channel = [&](int64_t c) __attribute__((always_inline)) {
    const float mean = static_cast<float>(totals[c] / count);
    double sum = 0;
    for (int64_t i = 0; i < l.n; ++i) sum += row_square_sum(x + l.offset(i, c), l.inner, mean);
    squares[c] = static_cast<float>(sum);
  };
  parallel_for_isa(l.channels, parallel, channel);
}

// ---- sync_batch_norm ----

std::vector<Shape> SyncBatchNormOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 5);
  const int64_t c = channels_of(type(), inputs[0]);
  const char* names[] = {"gamma", "beta", "running_mean", "running_var"};
  for (size_t i = 1; i <= 4; ++i) require_shape(type(), inputs, i, names[i - 1], Shape{c});
  require_shape(type(), inputs, 5, "total_sums", Shape{c + 1});
  require_shape(type(), inputs, 6, "total_squares", Shape{c + 1});
  return {inputs[0], Shape{c}, Shape{c}, Shape{c}, Shape{c}};
}

SyncBatchNormOp::SyncBatchNormOp(Attrs attrs) : TypedOperator(std::move(attrs), kType) {
  require(params().training, type(),
          ": mode 'test' normalizes by the running statistics, which batch_norm does; "
          "sync_batch_norm always uses the batches' own");
}

GradientSpec SyncBatchNormOp::gradient() const {
  GradientSpec spec;
  spec.ops.push_back(
      {BatchNormGradSumsOp::kType, attrs_, {input(0), output(1), output_grad(0)}, {temp(0)}});
  spec.ops.push_back(
      {SyncBatchNormGradOp::kType,
       attrs_,
       {input(0), input(1), output(1), output(2), output_grad(0), temp(0), replica_sum_of_temp(0)},
       {input_grad(0), input_grad(1), input_grad(2)}});
  return spec;
}

void SyncBatchNormOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                  const std::vector<Tensor*>& outputs, OpContext&) {
  const float eps = params().eps, momentum = params().momentum;
  const Layout l(inputs[0]->shape());
  const float* x = inputs[0]->data();
  const float* gamma = inputs[1]->data();
  const float* beta = inputs[2]->data();
  const float* running_mean = inputs[3]->data();
  const float* running_var = inputs[4]->data();
  const float* sums = inputs[5]->data();
  const float* squares = inputs[6]->data();
  float* y = outputs[0]->mutable_data();
  float* saved_mean = outputs[1]->mutable_data();
  float* saved_inv_std = outputs[2]->mutable_data();
  float* new_mean = outputs[3]->mutable_data();
  float* new_var = outputs[4]->mutable_data();
  const double m = sums[l.channels];
  require(m > 1, type(), ": training needs more than one value per channel over the replicas; ",
          "the totals count ", m, " (use a larger batch)");
  // Channel c's statistics (into the outputs) and the affine map they give.
  const auto statistics = [&](int64_t c) __attribute__((always_inline)) {
    const float mean = static_cast<float>(sums[c] / m);
    const float var = static_cast<float>(squares[c] / m);
    const float unbiased = static_cast<float>(squares[c] / (m - 1));
    new_mean[c] = momentum * running_mean[c] + (1.0f - momentum) * mean;
    new_var[c] = momentum * running_var[c] + (1.0f - momentum) * unbiased;
    const float inv_std = 1.0f / std::sqrt(var + eps);
    saved_mean[c] = mean;
    saved_inv_std[c] = inv_std;
    return formula::BatchNormAffine(gamma[c], beta[c], mean, inv_std);
  };
  const bool parallel = l.count() > kParallelMinArithmetic;
  if (inputs[0]->channel_block() > 0) {
    const ChannelBlocks e(*inputs[0]);
    float* scale = reinterpret_cast<float*>(workspace_doubles(l.channels));
    float* shift = scale + l.channels;
    for (int64_t c = 0; c < l.channels; ++c) {
      const formula::BatchNormAffine affine = statistics(c);
      scale[c] = affine.scale;
      shift[c] = affine.shift;
    }
    e.each(parallel, [&](int64_t k, int64_t c) { y[k] = x[k] * scale[c] + shift[c]; });
    return;
  }
  const auto channel = [&](int64_t c) __attribute__((always_inline)) {
    const formula::BatchNormAffine affine = statistics(c);
    for (int64_t i = 0; i < l.n; ++i) {
      const float* in = x + l.offset(i, c);
      float* out = y + l.offset(i, c);
      for (int64_t s = 0; s < l.inner; ++s) out[s] = affine(in[s]);
    }
  };
  parallel_for_isa(l.channels, parallel, channel);
}

// ---- batch_norm_grad_sums ----

std::vector<Shape> BatchNormGradSumsOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  const int64_t c = channels_of(type(), inputs[0]);
  require_shape(type(), inputs, 1, "saved_mean", Shape{c});
  require_shape(type(), inputs, 2, "dy", inputs[0]);
  return {Shape{2 * c + 1}};
}

ChannelBlocking BatchNormGradSumsOp::channel_blocking(const std::vector<Shape>&, int block) const {
  return cpu::uniform_channel_blocks(block, {0, 2});
}

void BatchNormGradSumsOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                      const std::vector<Tensor*>& outputs, OpContext&) {
  const Layout l(inputs[0]->shape());
  const float* x = inputs[0]->data();
  const float* mean = inputs[1]->data();
  const float* dy = inputs[2]->data();
  float* sums = outputs[0]->mutable_data();
  sums[2 * l.channels] = static_cast<float>(l.n * l.inner);
  const bool parallel = 2 * l.count() > kParallelMinArithmetic;
  if (inputs[0]->channel_block() > 0) {
    const ChannelBlocks e(*inputs[0]);
    double* workspace = workspace_doubles((e.n + 1) * e.channels);
    blocked_channel_sums(
        e, parallel, workspace, [&](int64_t base, int64_t k, int64_t) { return dy[base + k]; },
        sums);
    blocked_channel_sums(
        e, parallel, workspace,
        [&](int64_t base, int64_t k, int64_t c) { return dy[base + k] * (x[base + k] - mean[c]); },
        sums + l.channels);
    return;
  }
  const auto channel = [&](int64_t c) __attribute__((always_inline)) {
    double sum_dy = 0, sum_dy_centered = 0;
    for (int64_t i = 0; i < l.n; ++i) {
      sum_dy += row_sum(dy + l.offset(i, c), l.inner);
      sum_dy_centered +=
          row_dot_centered(dy + l.offset(i, c), x + l.offset(i, c), l.inner, mean[c]);
    }
    sums[c] = static_cast<float>(sum_dy);
    sums[l.channels + c] = static_cast<float>(sum_dy_centered);
  };
  parallel_for_isa(l.channels, parallel, channel);
}

// ---- sync_batch_norm_grad ----

std::vector<Shape> SyncBatchNormGradOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 3);
  const int64_t c = channels_of(type(), inputs[0]);
  const char* names[] = {"gamma", "saved_mean", "saved_inv_std"};
  for (size_t i = 1; i <= 3; ++i) require_shape(type(), inputs, i, names[i - 1], Shape{c});
  require_shape(type(), inputs, 4, "dy", inputs[0]);
  require_shape(type(), inputs, 5, "grad_sums", Shape{2 * c + 1});
  require_shape(type(), inputs, 6, "total_grad_sums", Shape{2 * c + 1});
  return {inputs[0], Shape{c}, Shape{c}};
}

ChannelBlocking SyncBatchNormGradOp::channel_blocking(const std::vector<Shape>&, int block) const {
  return cpu::uniform_channel_blocks(block, {0, 4}, {0});
}

void SyncBatchNormGradOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                      const std::vector<Tensor*>& outputs, OpContext&) {
  const Layout l(inputs[0]->shape());
  const float* x = inputs[0]->data();
  const float* gamma = inputs[1]->data();
  const float* saved_mean = inputs[2]->data();
  const float* saved_inv_std = inputs[3]->data();
  const float* dy = inputs[4]->data();
  const float* local = inputs[5]->data();
  const float* total = inputs[6]->data();
  float* dx = outputs[0]->mutable_data();
  float* dgamma = outputs[1]->mutable_data();
  float* dbeta = outputs[2]->mutable_data();
  const double m = total[2 * l.channels];
  // Channel c's dgamma and dbeta, and the coefficients of its dx.
  struct Coefficients {
    float scale, mean_dy, slope;
  };
  const auto coefficients = [&](int64_t c) __attribute__((always_inline)) {
    const float inv_std = saved_inv_std[c];
    dgamma[c] = local[l.channels + c] * inv_std;
    dbeta[c] = local[c];
    // As batch_norm_grad, with the sums over every replica.
    const float dg = total[l.channels + c] * inv_std;
    return Coefficients{gamma[c] * inv_std, m > 0 ? static_cast<float>(total[c] / m) : 0.0f,
                        m > 0 ? static_cast<float>(dg * inv_std / m) : 0.0f};
  };
  const bool parallel = l.count() > kParallelMinArithmetic;
  if (inputs[0]->channel_block() > 0) {
    const ChannelBlocks e(*inputs[0]);
    Coefficients* per_channel = reinterpret_cast<Coefficients*>(
        workspace_doubles((l.channels * sizeof(Coefficients) + 7) / 8));
    for (int64_t c = 0; c < l.channels; ++c) per_channel[c] = coefficients(c);
    e.each(parallel, [&](int64_t k, int64_t c) {
      const Coefficients& coef = per_channel[c];
      dx[k] = coef.scale * (dy[k] - coef.mean_dy - (x[k] - saved_mean[c]) * coef.slope);
    });
    return;
  }
  const auto channel = [&](int64_t c) __attribute__((always_inline)) {
    const Coefficients coef = coefficients(c);
    const float mean = saved_mean[c];
    for (int64_t i = 0; i < l.n; ++i) {
      const float* g = dy + l.offset(i, c);
      const float* in = x + l.offset(i, c);
      float* out = dx + l.offset(i, c);
      for (int64_t s = 0; s < l.inner; ++s)
        out[s] = coef.scale * (g[s] - coef.mean_dy - (in[s] - mean) * coef.slope);
    }
  };
  parallel_for_isa(l.channels, parallel, channel);
}

PURINE_REGISTER_OPERATOR(BatchNormSumsOp);
PURINE_REGISTER_OPERATOR(BatchNormSquareSumsOp);
PURINE_REGISTER_OPERATOR(SyncBatchNormOp);
PURINE_REGISTER_OPERATOR(BatchNormGradSumsOp);
PURINE_REGISTER_OPERATOR(SyncBatchNormGradOp);

}  // namespace purine
