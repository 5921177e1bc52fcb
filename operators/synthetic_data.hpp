// synthetic_data: a source operator (no inputs) that serves mini-batches of random images and
// labels drawn from a seed, to benchmark models without a data set (`purine train
// --data=synthetic:3x224x224:1000`).
//   outputs: 0 images [batch, channels, rows, cols], uniform in [-1, 1)
//            1 labels [batch], class indices as floats, uniform in [0, classes)
//   attrs:   channels, rows, cols, classes, batch  int  (required, >= 1)
//            samples int     samples per epoch (default 50000; at least one global batch)
//            seed    int     (default 1); split string "train" or "test" (another stream)
//            rank, ranks int this data-parallel rank of `ranks` (default 0 of 1)
//   Not differentiable.
// The data: `pool` distinct batches (as many as fit in 256 MiB, at most 4) are drawn from the
// seed when the first batch is asked for, each from its own stream; batch k of rank r is pool
// entry (k * ranks + r) mod pool. Serving a batch is then one copy, so the source never slows a
// benchmark down, and a batch is a pure function of the seed, the rank and k (threads, resumes
// and other random ops change nothing). It is its own DataSource (operators/data_source.hpp).
// Thread-safety: as any operator; the accessors between computes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "operators/data_source.hpp"
#include "operators/operator.hpp"

namespace purine {

class SyntheticDataOp : public TypedOperator<SyntheticDataOp>, public DataSource {
 public:
  static constexpr char kType[] = "synthetic_data";
  static constexpr char kSignature[] =
      "() -> (images [batch, channels, rows, cols], labels [batch]); attrs: channels, rows, cols, "
      "classes, batch (ints, required), samples, seed, split, rank, ranks";
  explicit SyntheticDataOp(Attrs attrs);

  int num_inputs() const override { return 0; }
  int num_outputs() const override { return 2; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  DataSource* data_source() override { return this; }

  int64_t samples() const override { return samples_; }
  int rows() const override { return static_cast<int>(rows_); }
  int cols() const override { return static_cast<int>(cols_); }
  int classes() const override { return static_cast<int>(classes_); }
  int64_t batches_per_epoch() const override { return samples_ / (batch_ * ranks_); }
  int64_t batches_served() const override { return served_; }
  void skip_to(int64_t batch) override;
  void rewind() override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;

 private:
  void draw_pool();

  const int64_t channels_, rows_, cols_, classes_, batch_, samples_;
  const int64_t rank_, ranks_;
  const uint64_t seed_;
  std::vector<std::vector<float>> images_, labels_;  // the pool, drawn by the first compute()
  int64_t served_ = 0;
};

}  // namespace purine
