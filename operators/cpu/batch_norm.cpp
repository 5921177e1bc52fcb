#include "operators/batch_norm.hpp"

#include <algorithm>
#include <cmath>

#include "base/error.hpp"
#include "operators/cpu/channel_sums.hpp"
#include "operators/cpu/contiguity.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/registry.hpp"

namespace purine {

using cpu::row_dot_centered;
using cpu::row_square_sum;
using cpu::row_sum;

namespace {

// "train" -> true, "test" -> false; anything else throws.
bool training(const std::string& type, const Attrs& attrs) {
  const std::string mode = attrs.get_string("mode", "train");
  require(mode == "train" || mode == "test", type, ": mode is '", mode,
          "', expected 'train' or 'test'");
  return mode == "train";
}

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

}  // namespace

std::vector<Shape> BatchNormOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 5);
  const bool train = training(type(), attrs_);
  const int64_t c =
      check_channels(type(), inputs, {"gamma", "beta", "running_mean", "running_var"});
  const int64_t m = inputs[0].count() / std::max<int64_t>(c, 1);
  require(!train || m > 1 || c == 0, type(), ": training needs more than one value per channel; ",
          "input 0 (x) has shape ", inputs[0], " (use mode 'test' or a larger batch)");
  return {inputs[0], Shape{c}, Shape{c}, Shape{c}, Shape{c}};
}

GradientSpec BatchNormOp::gradient() const {
  GradientSpec spec;
  spec.ops.push_back({BatchNormGradOp::kType,
                      attrs_,
                      {input(0), input(1), output(1), output(2), output_grad(0)},
                      {input_grad(0), input_grad(1), input_grad(2)}});
  return spec;
}

void BatchNormOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                              const std::vector<Tensor*>& outputs, OpContext&) {
  require_contiguous(type(), inputs, outputs);
  const bool train = training(type(), attrs_);
  const float eps = static_cast<float>(attrs_.get_float("eps", 1e-5));
  const float momentum = static_cast<float>(attrs_.get_float("momentum", 0.9));
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

#pragma omp parallel for if (m * channels > kParallelMinArithmetic)
  for (int64_t c = 0; c < channels; ++c) {
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
    const float scale = gamma[c] * inv_std;
    const float shift = beta[c] - mean * scale;
    for (int64_t i = 0; i < n; ++i) {
      const float* in = x + (i * channels + c) * inner;
      float* out = y + (i * channels + c) * inner;
      for (int64_t s = 0; s < inner; ++s) out[s] = in[s] * scale + shift;
    }
  }
}

std::vector<Shape> BatchNormGradOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 3);
  training(type(), attrs_);
  const int64_t c = check_channels(type(), inputs, {"gamma", "saved_mean", "saved_inv_std"});
  require(inputs[4] == inputs[0], type(), ": input 4 (dy) has shape ", inputs[4],
          ", expected input 0's (x) shape ", inputs[0]);
  return {inputs[0], Shape{c}, Shape{c}};
}

void BatchNormGradOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                  const std::vector<Tensor*>& outputs, OpContext&) {
  require_contiguous(type(), inputs, outputs);
  const bool train = training(type(), attrs_);
  const Shape& shape = inputs[0]->shape();
  const int64_t n = shape[0], channels = shape[1], inner = shape.count_from(2);
  const double m = static_cast<double>(n * inner);
  const float* x = inputs[0]->data();
  const float* gamma = inputs[1]->data();
  const float* saved_mean = inputs[2]->data();
  const float* saved_inv_std = inputs[3]->data();
  const float* dy = inputs[4]->data();
  float* dx = outputs[0]->mutable_data();
  float* dgamma = outputs[1]->mutable_data();
  float* dbeta = outputs[2]->mutable_data();

#pragma omp parallel for if (n * inner * channels > kParallelMinArithmetic)
  for (int64_t c = 0; c < channels; ++c) {
    const float mean = saved_mean[c], inv_std = saved_inv_std[c];
    double sum_dy = 0, sum_dy_centered = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t offset = (i * channels + c) * inner;
      sum_dy += row_sum(dy + offset, inner);
      sum_dy_centered += row_dot_centered(dy + offset, x + offset, inner, mean);
    }
    // dgamma = sum(dy xhat) = inv_std sum(dy (x - mean))
    const float dg = static_cast<float>(sum_dy_centered) * inv_std;
    dgamma[c] = dg;
    dbeta[c] = static_cast<float>(sum_dy);
    const float scale = gamma[c] * inv_std;
    // train: dx = scale (dy - sum_dy / M - (x - mean) inv_std * dg / M)
    const float mean_dy = train && m > 0 ? static_cast<float>(sum_dy / m) : 0.0f;
    const float slope = train && m > 0 ? static_cast<float>(dg * inv_std / m) : 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t offset = (i * channels + c) * inner;
      const float* g = dy + offset;
      const float* in = x + offset;
      float* out = dx + offset;
      for (int64_t s = 0; s < inner; ++s) {
        out[s] = scale * (g[s] - mean_dy - (in[s] - mean) * slope);
      }
    }
  }
}

PURINE_REGISTER_OPERATOR(BatchNormOp);
PURINE_REGISTER_OPERATOR(BatchNormGradOp);

}  // namespace purine
