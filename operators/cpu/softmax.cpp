#include "operators/softmax.hpp"

#include <algorithm>
#include <cmath>

#include "base/error.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/registry.hpp"

namespace purine {

namespace {

// The normalized axis for `shape`, or an Error naming the attribute and the rank.
int resolve_axis(const std::string& type, int64_t axis, const Shape& shape) {
  const int64_t rank = shape.ndim();
  require(axis >= -rank && axis < rank, type, ": attribute 'axis' is ", axis, " but input 0 has ",
          rank, " dimensions ", shape, "; expected -", rank, " <= axis < ", rank);
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// One row of `channels` contiguous values.
void softmax_row(const float* x, float* y, int64_t channels) {
  float max = x[0];
  for (int64_t c = 1; c < channels; ++c) max = std::max(max, x[c]);
  float sum = 0.0f;
  for (int64_t c = 0; c < channels; ++c) {
    y[c] = std::exp(x[c] - max);
    sum += y[c];
  }
  const float inv = 1.0f / sum;
  for (int64_t c = 0; c < channels; ++c) y[c] *= inv;
}

// One block of `channels` x `inner` values, softmax along the channels for every inner position;
// `scratch` holds 2 * inner floats.
void softmax_block(const float* x, float* y, int64_t channels, int64_t inner, float* scratch) {
  float* max = scratch;
  float* sum = scratch + inner;
  std::copy(x, x + inner, max);
  for (int64_t c = 1; c < channels; ++c) {
    const float* xc = x + c * inner;
    for (int64_t j = 0; j < inner; ++j) max[j] = std::max(max[j], xc[j]);
  }
  std::fill(sum, sum + inner, 0.0f);
  for (int64_t c = 0; c < channels; ++c) {
    const float* xc = x + c * inner;
    float* yc = y + c * inner;
    for (int64_t j = 0; j < inner; ++j) {
      yc[j] = std::exp(xc[j] - max[j]);
      sum[j] += yc[j];
    }
  }
  for (int64_t j = 0; j < inner; ++j) sum[j] = 1.0f / sum[j];
  for (int64_t c = 0; c < channels; ++c) {
    float* yc = y + c * inner;
    for (int64_t j = 0; j < inner; ++j) yc[j] *= sum[j];
  }
}

void softmax_grad_row(const float* y, const float* dy, float* dx, int64_t channels) {
  float dot = 0.0f;
  for (int64_t c = 0; c < channels; ++c) dot += y[c] * dy[c];
  for (int64_t c = 0; c < channels; ++c) dx[c] = y[c] * (dy[c] - dot);
}

void softmax_grad_block(const float* y, const float* dy, float* dx, int64_t channels, int64_t inner,
                        float* dot) {
  std::fill(dot, dot + inner, 0.0f);
  for (int64_t c = 0; c < channels; ++c) {
    const float* yc = y + c * inner;
    const float* dyc = dy + c * inner;
    for (int64_t j = 0; j < inner; ++j) dot[j] += yc[j] * dyc[j];
  }
  for (int64_t c = 0; c < channels; ++c) {
    const float* yc = y + c * inner;
    const float* dyc = dy + c * inner;
    float* dxc = dx + c * inner;
    for (int64_t j = 0; j < inner; ++j) dxc[j] = yc[j] * (dyc[j] - dot[j]);
  }
}

}  // namespace

SoftmaxOp::SoftmaxOp(Attrs attrs)
    : TypedOperator(std::move(attrs)), axis_(attrs_.get_int("axis", 1)) {}

std::vector<Shape> SoftmaxOp::output_shapes(const std::vector<Shape>& inputs) const {
  std::vector<Shape> out = SameShapeOp::output_shapes(inputs);
  resolve_axis(type(), axis_, inputs[0]);
  return out;
}

GradientSpec SoftmaxOp::gradient() const {
  GradientSpec spec;
  spec.ops.push_back({SoftmaxGradOp::kType,
                      Attrs().set("axis", axis_),
                      {output(0), output_grad(0)},
                      {input_grad(0)}});
  return spec;
}

void SoftmaxOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                            const std::vector<Tensor*>& outputs, OpContext&) {
  const Shape& shape = inputs[0]->shape();
  const int axis = resolve_axis(type(), axis_, shape);
  const int64_t outer = shape.count_to(axis);
  const int64_t channels = shape[axis];
  const int64_t inner = shape.count_from(axis + 1);
  const int64_t block = channels * inner;
  if (block == 0) return;
  const float* x = inputs[0]->data();
  float* y = outputs[0]->mutable_data();
  if (inner == 1) {
    parallel_for(outer, outer * block > kParallelMinNormalization,
                 [&](int64_t n) { softmax_row(x + n * block, y + n * block, channels); });
    return;
  }
  parallel_region(outer * block > kParallelMinNormalization, [&] {
    std::vector<float> scratch(2 * inner);
#pragma omp for
    for (int64_t n = 0; n < outer; ++n) {
      softmax_block(x + n * block, y + n * block, channels, inner, scratch.data());
    }
  });
}

SoftmaxGradOp::SoftmaxGradOp(Attrs attrs)
    : TypedOperator(std::move(attrs)), axis_(attrs_.get_int("axis", 1)) {}

std::vector<Shape> SoftmaxGradOp::output_shapes(const std::vector<Shape>& inputs) const {
  std::vector<Shape> out = SameShapeOp::output_shapes(inputs);
  resolve_axis(type(), axis_, inputs[0]);
  return out;
}

void SoftmaxGradOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                const std::vector<Tensor*>& outputs, OpContext&) {
  const Shape& shape = inputs[0]->shape();
  const int axis = resolve_axis(type(), axis_, shape);
  const int64_t outer = shape.count_to(axis);
  const int64_t channels = shape[axis];
  const int64_t inner = shape.count_from(axis + 1);
  const int64_t block = channels * inner;
  if (block == 0) return;
  const float* y = inputs[0]->data();
  const float* dy = inputs[1]->data();
  float* dx = outputs[0]->mutable_data();
  if (inner == 1) {
    parallel_for(outer, outer * block > kParallelMinNormalization, [&](int64_t n) {
      softmax_grad_row(y + n * block, dy + n * block, dx + n * block, channels);
    });
    return;
  }
  parallel_region(outer * block > kParallelMinNormalization, [&] {
    std::vector<float> dot(inner);
#pragma omp for
    for (int64_t n = 0; n < outer; ++n) {
      softmax_grad_block(y + n * block, dy + n * block, dx + n * block, channels, inner,
                         dot.data());
    }
  });
}

PURINE_REGISTER_OPERATOR(SoftmaxOp);
PURINE_REGISTER_OPERATOR(SoftmaxGradOp);

}  // namespace purine
