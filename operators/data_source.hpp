// DataSource: what a source operator that serves a data set in mini-batches tells its user, so
// that a trainer needs no kernel's type: the data set's metadata and the cursor (which batch is
// served next). An operator that is one returns itself from Operator::data_source(); the
// operator owns it. Knows nothing of graphs. Thread-safety: the operator's own, i.e. call it
// between computes, from the thread that calls compute().
#pragma once

#include <cstdint>

namespace purine {

class DataSource {
 public:
  virtual ~DataSource() = default;

  // Samples in the data set (the split this source reads).
  virtual int64_t samples() const = 0;
  // The size of one image.
  virtual int rows() const = 0;
  virtual int cols() const = 0;
  // The number of classes its labels lie in, [0, classes()).
  virtual int classes() const = 0;
  // Batches this source serves per epoch.
  virtual int64_t batches_per_epoch() const = 0;

  // The cursor: batches served so far, counting those skipped by skip_to().
  virtual int64_t batches_served() const = 0;
  // Makes the next batch served batch number `batch` of the source's order, as if `batch`
  // batches had been served already (to resume training). Only before the first compute().
  virtual void skip_to(int64_t batch) = 0;
  // Serves batch 0 of the source's order next, as a fresh source would (a test split before
  // each evaluation). Not while a compute() is in progress.
  virtual void rewind() = 0;
};

}  // namespace purine
