#include "operators/synthetic_data.hpp"

#include <algorithm>
#include <cstring>

#include "base/error.hpp"
#include "base/hash.hpp"
#include "base/rng.hpp"
#include "operators/registry.hpp"

namespace purine {

namespace {

int64_t positive(const Attrs& attrs, const char* key) {
  require(attrs.has(key), "synthetic_data: missing attribute '", key, "'");
  const int64_t v = attrs.get_int(key);
  require(v >= 1, "synthetic_data: attribute '", key, "' is ", v, "; expected >= 1");
  return v;
}

constexpr int64_t kPoolBytes = int64_t{256} << 20;
constexpr int64_t kMaxPool = 4;

}  // namespace

SyntheticDataOp::SyntheticDataOp(Attrs attrs)
    : TypedOperator(std::move(attrs)),
      channels_(positive(attrs_, "channels")),
      rows_(positive(attrs_, "rows")),
      cols_(positive(attrs_, "cols")),
      classes_(positive(attrs_, "classes")),
      batch_(positive(attrs_, "batch")),
      samples_(attrs_.get_int("samples", 50000)),
      rank_(attrs_.get_int("rank", 0)),
      ranks_(attrs_.get_int("ranks", 1)),
      seed_(seed_for_name(static_cast<uint64_t>(attrs_.get_int("seed", 1)),
                          "synthetic_data:" + attrs_.get_string("split", "train"))) {
  require(ranks_ >= 1 && rank_ >= 0 && rank_ < ranks_, "synthetic_data: rank ", rank_, " of ",
          ranks_, " ranks");
  require(samples_ >= batch_ * ranks_, "synthetic_data: ", samples_,
          " samples per epoch hold no global batch of ", batch_ * ranks_);
}

std::vector<Shape> SyntheticDataOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 2);
  return {Shape{batch_, channels_, rows_, cols_}, Shape{batch_}};
}

void SyntheticDataOp::skip_to(int64_t batch) {
  require(images_.empty(), "synthetic_data: skip_to after the first batch");
  served_ = batch;
}

void SyntheticDataOp::rewind() { served_ = 0; }  // the pool stays: batch k is entry k's

void SyntheticDataOp::draw_pool() {
  const int64_t image_floats = batch_ * channels_ * rows_ * cols_;
  const int64_t pool =
      std::clamp<int64_t>(kPoolBytes / std::max<int64_t>(1, image_floats * 4), 1, kMaxPool);
  for (int64_t p = 0; p < pool; ++p) {
    Rng rng(mix64(seed_ + static_cast<uint64_t>(p)));
    std::vector<float> images(static_cast<size_t>(image_floats)), labels(batch_);
    for (float& v : images) v = rng.uniform(-1.0f, 1.0f);
    for (float& v : labels) v = static_cast<float>(rng.below(static_cast<uint64_t>(classes_)));
    images_.push_back(std::move(images));
    labels_.push_back(std::move(labels));
  }
}

void SyntheticDataOp::compute_cpu(const std::vector<const Tensor*>&,
                                  const std::vector<Tensor*>& outputs, OpContext&) {
  if (images_.empty()) draw_pool();
  const size_t entry =
      static_cast<size_t>((served_ * ranks_ + rank_) % static_cast<int64_t>(images_.size()));
  std::memcpy(outputs[0]->mutable_data(), images_[entry].data(),
              images_[entry].size() * sizeof(float));
  std::memcpy(outputs[1]->mutable_data(), labels_[entry].data(),
              labels_[entry].size() * sizeof(float));
  ++served_;
}

PURINE_REGISTER_OPERATOR(SyntheticDataOp);

}  // namespace purine
