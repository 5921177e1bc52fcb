// Batch normalization per channel (axis 1) of x [N, C] or [N, C, H, W] (any rank >= 2), and its
// gradient kernel.
//   batch_norm:      (x, gamma [C], beta [C], running_mean [C], running_var [C])
//                    -> (y (x's shape), saved_mean [C], saved_inv_std [C],
//                        new_running_mean [C], new_running_var [C])
//     mode "train": mean and variance (biased) over the M = N * H * W values of each channel;
//       y = gamma (x - mean) inv_std + beta with inv_std = 1 / sqrt(var + eps);
//       saved_* are that mean and inv_std; new_running = momentum running + (1 - momentum)
//       batch statistic, using the unbiased variance var M / (M - 1). Needs M > 1.
//     mode "test": y uses running_mean and running_var; saved_* are those statistics (mean,
//       1 / sqrt(running_var + eps)); new_running_* are copies of running_*.
//   batch_norm_grad: (x, gamma, saved_mean, saved_inv_std, dy) -> (dx, dgamma, dbeta)
//     train: dx = gamma inv_std (dy - mean(dy) - xhat mean(dy xhat)), xhat = (x - mean) inv_std
//     test:  dx = gamma inv_std dy (the statistics are constants)
//     both:  dgamma = sum(dy xhat), dbeta = sum(dy) per channel.
//   batch_norm_relu: batch_norm's inputs and outputs, y = max(batch_norm's y, 0): batch_norm then
//     relu in one pass (graphs/fusion.hpp puts it where a graph has that chain).
//   batch_norm_relu_grad: (x, gamma, saved_mean, saved_inv_std, y, dy) -> (dx, dgamma, dbeta):
//     relu_grad(y, dy), then batch_norm_grad of that, in one op; the same floats as the two.
// Attributes (the same on all four): `eps` (1e-5), `momentum` (0.9), `mode` ("train" or "test",
// default "train"). The gradient flows from y only (outputs 1-4 are statistics); running_mean
// and running_var get none. The gradient ops are not differentiable. All tensors must be
// contiguous. Sums run per channel in a fixed order, so any thread count gives equal bits.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "operators/operator.hpp"

namespace purine {

// The attributes of the batch-norm ops (the four below and sync_batch_norm's,
// operators/sync_batch_norm.hpp), read and checked once when an op is made; both kernels read
// them.
struct BatchNormParams {
  // Throws purine::Error naming `type` when the mode is neither "train" nor "test".
  BatchNormParams(const Attrs& attrs, const char* type);
  bool training;   // mode "train" (the default); "test" uses the running statistics
  float eps;       // 1e-5
  float momentum;  // 0.9
};

// What the batch-norm ops share: their parsed attributes.
class BatchNormFamily : public Operator {
 public:
  BatchNormFamily(Attrs attrs, const char* type);
  const BatchNormParams& params() const { return params_; }
  // x, y, and the gradients' dy and dx (and batch_norm_relu_grad's y) all blocked or none, in
  // blocks of a multiple of 8 channels.
  ChannelBlocking channel_blocking(const std::vector<Shape>& inputs, int block) const override;

 private:
  const BatchNormParams params_;
};

class BatchNormOp : public TypedOperator<BatchNormOp, BatchNormFamily> {
 public:
  static constexpr char kType[] = "batch_norm";
  static constexpr char kSignature[] =
      "(x [N, C, ...], gamma [C], beta [C], running_mean [C], running_var [C]) -> (y, saved_mean, "
      "saved_inv_std, new_running_mean, new_running_var); attrs: eps (float, 1e-5), momentum "
      "(float, 0.9), mode (string, train|test)";
  explicit BatchNormOp(Attrs attrs) : TypedOperator(std::move(attrs), kType) {}
  int num_inputs() const override { return 5; }
  int num_outputs() const override { return 5; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  bool differentiable() const override { return true; }
  GradientSpec gradient() const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class BatchNormGradOp : public TypedOperator<BatchNormGradOp, BatchNormFamily> {
 public:
  static constexpr char kType[] = "batch_norm_grad";
  static constexpr char kSignature[] =
      "(x, gamma, saved_mean, saved_inv_std, dy) -> (dx, dgamma, dbeta); attrs: as batch_norm";
  explicit BatchNormGradOp(Attrs attrs) : TypedOperator(std::move(attrs), kType) {}
  int num_inputs() const override { return 5; }
  int num_outputs() const override { return 3; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class BatchNormReluOp : public TypedOperator<BatchNormReluOp, BatchNormFamily> {
 public:
  static constexpr char kType[] = "batch_norm_relu";
  static constexpr char kSignature[] =
      "(x [N, C, ...], gamma [C], beta [C], running_mean [C], running_var [C]) -> (y = "
      "max(batch_norm(x), 0), saved_mean, saved_inv_std, new_running_mean, new_running_var); "
      "attrs: as batch_norm";
  explicit BatchNormReluOp(Attrs attrs) : TypedOperator(std::move(attrs), kType) {}
  int num_inputs() const override { return 5; }
  int num_outputs() const override { return 5; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  bool differentiable() const override { return true; }
  GradientSpec gradient() const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class BatchNormReluGradOp : public TypedOperator<BatchNormReluGradOp, BatchNormFamily> {
 public:
  static constexpr char kType[] = "batch_norm_relu_grad";
  static constexpr char kSignature[] =
      "(x, gamma, saved_mean, saved_inv_std, y, dy) -> (dx, dgamma, dbeta): batch_norm_grad of "
      "relu_grad(y, dy); attrs: as batch_norm";
  explicit BatchNormReluGradOp(Attrs attrs) : TypedOperator(std::move(attrs), kType) {}
  int num_inputs() const override { return 6; }
  int num_outputs() const override { return 3; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

}  // namespace purine
