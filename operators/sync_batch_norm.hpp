// Synchronized batch normalization, in pieces that a graph joins with sums over the replicas of a
// data-parallel graph (graphs/layers/batch_norm_layer.cpp, Graph::replica_sum): the statistics of
// each channel (axis 1 of x [N, C, ...]) are those of every replica's batch together, as
// PyTorch's SyncBatchNorm. Per-channel sums end with the count M of values they cover (N * H * W
// of one replica), so sums over replicas carry the whole count.
//   batch_norm_sums:        (x) -> sums [C + 1]: sum(x) per channel, then M.
//   batch_norm_square_sums: (x, total_sums [C + 1]) -> squares [C + 1]: sum((x - mean)^2) per
//                           channel about mean = total_sums[c] / total_sums[C], then M.
//   sync_batch_norm:        (x, gamma, beta, running_mean, running_var, total_sums,
//                            total_squares) -> (y, saved_mean, saved_inv_std, new_running_mean,
//                            new_running_var): batch_norm's training mode (operators/
//                           batch_norm.hpp) with mean = total_sums / count and the biased
//                           variance total_squares / count (count - 1 for the running one).
//     Its gradient flows from y to x, gamma and beta (the totals are constants to it):
//   batch_norm_grad_sums:   (x, saved_mean, dy) -> [2C + 1]: sum(dy), sum(dy (x - mean)), M.
//   sync_batch_norm_grad:   (x, gamma, saved_mean, saved_inv_std, dy, grad_sums, total_grad_sums)
//                           -> (dx, dgamma, dbeta): dgamma and dbeta from this replica's
//                           grad_sums (data parallelism sums them over replicas with the other
//                           gradients); dx = gamma inv_std (dy - S1 / M - (x - mean) inv_std S2 /
//                           M) from the totals over all replicas (S1, S2, M = total_grad_sums).
// Attributes: eps (1e-5) and momentum (0.9), as batch_norm (mode "train" only). All tensors must be
// contiguous; x, y, dy and dx may be in channel blocks (Tensor::channel_block), all of one op's
// or none, with the same bits. Sums run in a fixed order (in double, stored as float), so any
// thread count gives equal bits; with one replica (every total its partial) the results equal
// batch_norm's to float rounding.
#pragma once

#include <utility>
#include <vector>

#include "operators/batch_norm.hpp"
#include "operators/operator.hpp"

namespace purine {

class BatchNormSumsOp : public TypedOperator<BatchNormSumsOp> {
 public:
  static constexpr char kType[] = "batch_norm_sums";
  static constexpr char kSignature[] = "(x [N, C, ...]) -> (sums [C + 1]: sum(x) per channel, M)";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 1; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  ChannelBlocking channel_blocking(const std::vector<Shape>& inputs, int block) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class BatchNormSquareSumsOp : public TypedOperator<BatchNormSquareSumsOp> {
 public:
  static constexpr char kType[] = "batch_norm_square_sums";
  static constexpr char kSignature[] =
      "(x [N, C, ...], total_sums [C + 1]) -> (squares [C + 1]: sum((x - mean)^2) per channel, M)";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 2; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  ChannelBlocking channel_blocking(const std::vector<Shape>& inputs, int block) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class SyncBatchNormOp : public TypedOperator<SyncBatchNormOp, BatchNormFamily> {
 public:
  static constexpr char kType[] = "sync_batch_norm";
  static constexpr char kSignature[] =
      "(x [N, C, ...], gamma [C], beta [C], running_mean [C], running_var [C], total_sums [C + 1], "
      "total_squares [C + 1]) -> (y, saved_mean, saved_inv_std, new_running_mean, "
      "new_running_var); attrs: eps (float, 1e-5), momentum (float, 0.9)";
  // Throws purine::Error on mode "test": it always normalizes by the batches' statistics.
  explicit SyncBatchNormOp(Attrs attrs);
  int num_inputs() const override { return 7; }
  int num_outputs() const override { return 5; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  bool differentiable() const override { return true; }
  GradientSpec gradient() const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class BatchNormGradSumsOp : public TypedOperator<BatchNormGradSumsOp> {
 public:
  static constexpr char kType[] = "batch_norm_grad_sums";
  static constexpr char kSignature[] =
      "(x [N, C, ...], saved_mean [C], dy) -> (sums [2C + 1]: sum(dy), sum(dy (x - mean)), M)";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 3; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  ChannelBlocking channel_blocking(const std::vector<Shape>& inputs, int block) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

class SyncBatchNormGradOp : public TypedOperator<SyncBatchNormGradOp> {
 public:
  static constexpr char kType[] = "sync_batch_norm_grad";
  static constexpr char kSignature[] =
      "(x, gamma, saved_mean, saved_inv_std, dy, grad_sums [2C + 1], total_grad_sums [2C + 1]) "
      "-> (dx, dgamma, dbeta)";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 7; }
  int num_outputs() const override { return 3; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  ChannelBlocking channel_blocking(const std::vector<Shape>& inputs, int block) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

}  // namespace purine
