// idx_data: a source operator (no inputs) that serves mini-batches of an IDX data set (MNIST,
// Fashion-MNIST; file format in cpu/idx_file.hpp).
//   outputs: 0 images [batch, 1, rows, cols] = pixel * scale - mean
//            1 labels [batch], class indices as floats
//   attrs:   dir       string  folder of the IDX files (default /usr/share/datasets/fashion-mnist)
//            split     string  "train" or "test" (default "train")
//            batch     int     samples per batch on this rank (required, >= 1)
//            shuffle   int     0/1: a new order every epoch (default 1 for train, 0 for test)
//            seed      int     the shuffling seed (default 1)
//            rank      int     this data-parallel rank, 0 <= rank < ranks (default 0)
//            ranks     int     data-parallel ranks (default 1)
//            drop_last int     0/1 (default 1), see below
//            mirror    int     0/1: serve each sample flipped left-right with probability 1/2,
//                              decided afresh every epoch (default 0; augmentation for training)
//            scale     float   default 1/255, so pixels lie in [0, 1]
//            mean      float   subtracted after scaling (default 0)
//            classes   int     the model's number of classes (default 0). When > 0 every label
//                              must be below it (else purine::Error naming the label file, the
//                              record and its label) and classes() returns it; when 0,
//                              classes() is the largest label of this split + 1, which a split
//                              lacking the top class gets wrong: set it for evaluation data.
//   Not differentiable.
//
// Order. Epoch e visits the samples in a permutation drawn by Fisher-Yates from
// Rng(hash(seed, e)) (the identity without shuffle), so batch k is the same data for a given seed
// whatever the threads or other random ops. A global batch is `batch * ranks` consecutive
// samples of that order; rank r serves its r-th slice of `batch` samples, so the ranks together
// cover the global batch exactly once. With drop_last=1 an epoch is floor(samples / global
// batch) batches and the remainder of each order is skipped. With drop_last=0 an epoch is
// ceil(samples / global batch) batches and the last one is completed with the first samples of
// the next epoch's order (wrapping around; the next epoch still starts at its beginning);
// last_batch_valid() says how many leading rows of the last served batch belong to its epoch.
//
// Files and errors. The constructor reads the headers and labels and checks the image data's
// length (read through without keeping it: about 0.1 s for Fashion-MNIST's gzip training set,
// since a gzip trailer's length can be forged), so shape inference needs no pixels and a
// missing or corrupt file throws purine::Error when the graph is built. The pixels are loaded at
// the first compute() (shared by all idx_data ops of the process reading the same files) by a
// background thread that then keeps preparing the next batch into one of two buffers while the
// network runs; compute() waits for it and copies the batch out. An error in that thread is
// rethrown from compute().
//
// The operator is its own DataSource (operators/data_source.hpp): its metadata and cursor are
// reached through Operator::data_source() without knowing its type.
//
// Thread-safety: compute() must not run concurrently with itself (the dispatcher never does);
// the accessors may be called between computes from the thread that calls compute().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "operators/data_source.hpp"
#include "operators/operator.hpp"

namespace purine {

extern const char kDefaultIdxDir[];  // "/usr/share/datasets/fashion-mnist"

// Samples in a split of an IDX data set; throws purine::Error like the operator's constructor.
int64_t idx_sample_count(const std::string& dir, const std::string& split);

class IdxDataOp : public TypedOperator<IdxDataOp>, public DataSource {
 public:
  static constexpr char kType[] = "idx_data";
  static constexpr char kSignature[] =
      "() -> (images [batch, 1, rows, cols], labels [batch]); attrs: dir, split (train|test), "
      "batch (required), shuffle, seed, rank, ranks, drop_last, mirror, scale, mean, classes";
  explicit IdxDataOp(Attrs attrs);
  // Stops and joins the prefetch thread; waits at most for a file load in progress.
  ~IdxDataOp() override;

  int num_inputs() const override { return 0; }
  int num_outputs() const override { return 2; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;
  DataSource* data_source() override { return this; }

  int64_t samples() const override { return samples_; }
  // Batches this rank serves per epoch (see drop_last above).
  int64_t batches_per_epoch() const override { return batches_per_epoch_; }
  // The 'classes' attribute when > 0, else the largest label of the split + 1.
  int classes() const override { return classes_; }
  int rows() const override { return rows_; }
  int cols() const override { return cols_; }
  // The epoch of the last served batch; -1 before the first compute().
  int64_t epoch() const;
  // Batches served so far.
  int64_t batches_served() const override { return served_; }
  // Makes the first batch served batch number `batch` (of this order; for resuming training),
  // as if `batch` batches had been served already. Only before the first compute().
  void skip_to(int64_t batch) override;
  void rewind() override;
  // Leading rows of the last served batch that belong to its epoch: `batch`, except in the last
  // batch of an epoch with drop_last=0, whose remaining rows are wrapped-around padding.
  int64_t last_batch_valid() const { return last_valid_; }

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;

 private:
  class Prefetcher;  // the background thread and its two buffers (cpu/idx_data.cpp)

  const std::string dir_;
  const std::string split_;
  const int64_t batch_;
  const int64_t rank_;
  const int64_t ranks_;
  const bool shuffle_;
  const bool drop_last_;
  const bool mirror_;
  const uint64_t seed_;
  const float scale_;
  const float mean_;
  const int classes_attr_;  // 0: taken from the labels
  int64_t samples_ = 0;
  int rows_ = 0;
  int cols_ = 0;
  int classes_ = 0;
  int64_t batches_per_epoch_ = 0;
  int64_t served_ = 0;
  int64_t last_valid_ = 0;
  std::unique_ptr<Prefetcher> prefetcher_;  // created by the first compute()
};

}  // namespace purine
