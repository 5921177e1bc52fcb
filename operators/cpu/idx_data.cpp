#include "operators/idx_data.hpp"

#include <cmath>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>

#include "base/error.hpp"
#include "base/hash.hpp"
#include "base/rng.hpp"
#include "operators/cpu/idx_cache.hpp"
#include "operators/registry.hpp"

namespace purine {

const char kDefaultIdxDir[] = "/usr/share/datasets/fashion-mnist";

int64_t idx_sample_count(const std::string& dir, const std::string& split) {
  return cached_idx_metadata(dir, split).count;
}

namespace {

// Which samples batch k holds, a pure function of the attributes (see the header's "Order").
struct BatchPlan {
  int64_t count = 0;
  int64_t batch = 0;
  int64_t rank = 0;
  int64_t ranks = 1;
  bool shuffle = false;
  bool drop_last = true;
  bool mirror = false;
  uint64_t seed = 0;

  int64_t global() const { return batch * ranks; }
  int64_t batches_per_epoch() const {
    return drop_last ? count / global() : (count + global() - 1) / global();
  }
};

// The sample orders of the epochs in use, computed on demand. Owned by the prefetch thread.
class EpochOrders {
 public:
  explicit EpochOrders(const BatchPlan& plan) : plan_(plan) {}

  const std::vector<uint32_t>& order(int64_t epoch) {
    const int64_t key = plan_.shuffle ? epoch : 0;
    auto found = orders_.find(key);
    if (found != orders_.end()) return found->second;
    std::vector<uint32_t>& order = orders_[key];
    order.resize(static_cast<size_t>(plan_.count));
    std::iota(order.begin(), order.end(), uint32_t{0});
    if (plan_.shuffle) {
      Rng rng(splitmix64(plan_.seed ^ splitmix64(static_cast<uint64_t>(epoch))));
      for (int64_t i = plan_.count - 1; i > 0; --i) {
        std::swap(order[i], order[rng.below(static_cast<uint64_t>(i) + 1)]);
      }
    }
    return order;
  }

  // Forgets the orders of epochs before `epoch`.
  void forget_before(int64_t epoch) {
    if (plan_.shuffle) orders_.erase(orders_.begin(), orders_.lower_bound(epoch));
  }

 private:
  const BatchPlan plan_;
  std::map<int64_t, std::vector<uint32_t>> orders_;
};

bool checked_flag(const Attrs& attrs, const std::string& key, int64_t fallback) {
  const int64_t value = attrs.get_int(key, fallback);
  require(value == 0 || value == 1, "idx_data: attribute '", key, "' is ", value,
          "; expected 0 or 1");
  return value == 1;
}

int64_t checked_batch(const Attrs& attrs) {
  require(attrs.has("batch"), "idx_data: attribute 'batch' (samples per batch) is required");
  const int64_t batch = attrs.get_int("batch");
  require(batch >= 1, "idx_data: attribute 'batch' is ", batch, "; expected >= 1");
  return batch;
}

int64_t checked_ranks(const Attrs& attrs) {
  const int64_t ranks = attrs.get_int("ranks", 1);
  require(ranks >= 1, "idx_data: attribute 'ranks' is ", ranks, "; expected >= 1");
  return ranks;
}

int64_t checked_rank(const Attrs& attrs) {
  const int64_t rank = attrs.get_int("rank", 0);
  const int64_t ranks = attrs.get_int("ranks", 1);
  require(rank >= 0 && rank < ranks, "idx_data: attribute 'rank' is ", rank,
          "; expected 0 <= rank < ranks = ", ranks);
  return rank;
}

int checked_classes(const Attrs& attrs) {
  const int64_t classes = attrs.get_int("classes", 0);
  require(classes >= 0 && classes <= (int64_t{1} << 24), "idx_data: attribute 'classes' is ",
          classes, "; expected 0 (from the labels) or the model's number of classes");
  return static_cast<int>(classes);
}

float checked_float(const Attrs& attrs, const std::string& key, double fallback) {
  const double value = attrs.get_float(key, fallback);
  require(std::isfinite(value), "idx_data: attribute '", key, "' is ", value,
          "; expected a finite number");
  return static_cast<float>(value);
}

}  // namespace

// The prefetch thread: loads the data, then fills batch k into slot k % 2 as soon as the
// consumer has emptied that slot. A slot's contents belong to the producer while !ready and to
// the consumer while ready; the flag is handed over under mutex_.
class IdxDataOp::Prefetcher {
 public:
  struct Served {
    int64_t valid = 0;
  };

  // Serves batches first_batch, first_batch + 1, ...
  Prefetcher(const BatchPlan& plan, std::string dir, std::string split, int rows, int cols,
             int classes, float scale, float mean, int64_t first_batch)
      : plan_(plan),
        dir_(std::move(dir)),
        split_(std::move(split)),
        rows_(rows),
        cols_(cols),
        classes_(classes),
        scale_(scale),
        mean_(mean),
        orders_(plan),
        first_batch_(first_batch),
        next_take_(first_batch) {
    for (Slot& slot : slots_) {
      slot.images.resize(static_cast<size_t>(plan_.batch * rows_ * cols_));
      slot.labels.resize(static_cast<size_t>(plan_.batch));
    }
    thread_ = std::thread([this] { run(); });
  }

  ~Prefetcher() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // Waits for the next batch, copies it out and frees its slot. Rethrows the thread's error.
  Served take(float* images, float* labels) {
    Slot& slot = slots_[next_take_ % 2];
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return slot.ready || error_ != nullptr; });
      if (!slot.ready) std::rethrow_exception(error_);
    }
    std::copy(slot.images.begin(), slot.images.end(), images);
    std::copy(slot.labels.begin(), slot.labels.end(), labels);
    Served served{slot.valid};
    {
      std::lock_guard<std::mutex> lock(mutex_);
      slot.ready = false;
    }
    cv_.notify_all();
    ++next_take_;
    return served;
  }

 private:
  struct Slot {
    std::vector<float> images;
    std::vector<float> labels;
    int64_t valid = 0;
    bool ready = false;  // guarded by mutex_
  };

  void run() {
    try {
      data_ = shared_idx_dataset(dir_, split_);
      require(data_->count == plan_.count && data_->rows == rows_ && data_->cols == cols_,
              "idx_data: the ", split_, " files in ", dir_, " changed since the graph was built (",
              plan_.count, " images of ", rows_, "x", cols_, " then, ", data_->count, " of ",
              data_->rows, "x", data_->cols, " now)");
      check_idx_labels(*data_, classes_);  // the labels may have changed too
      for (int64_t k = first_batch_;; ++k) {
        Slot& slot = slots_[k % 2];
        {
          std::unique_lock<std::mutex> lock(mutex_);
          cv_.wait(lock, [&] { return stop_ || !slot.ready; });
          if (stop_) return;
        }
        fill(k, &slot);
        {
          std::lock_guard<std::mutex> lock(mutex_);
          slot.ready = true;
        }
        cv_.notify_all();
      }
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        error_ = std::current_exception();
      }
      cv_.notify_all();
    }
  }

  void fill(int64_t k, Slot* slot) {
    const int64_t per_epoch = plan_.batches_per_epoch();
    const int64_t epoch = k / per_epoch;
    const int64_t first = (k % per_epoch) * plan_.global() + plan_.rank * plan_.batch;
    orders_.forget_before(epoch);
    slot->valid = std::min(plan_.batch, std::max<int64_t>(0, plan_.count - first));
    const int64_t pixels = int64_t{rows_} * cols_;
    const float scale = scale_;
    const float mean = mean_;
    for (int64_t t = 0; t < plan_.batch; ++t) {
      // Positions past the end of this epoch's order wrap into the next epochs' orders.
      const int64_t position = first + t;
      const std::vector<uint32_t>& order = orders_.order(epoch + position / plan_.count);
      const int64_t sample = order[position % plan_.count];
      const uint8_t* source = data_->images.data() + sample * pixels;
      float* target = slot->images.data() + t * pixels;
      if (mirrored(epoch + position / plan_.count, sample)) {
        for (int64_t r = 0; r < rows_; ++r)
          for (int64_t c = 0; c < cols_; ++c)
            target[r * cols_ + c] =
                static_cast<float>(source[r * cols_ + cols_ - 1 - c]) * scale - mean;
      } else {
        for (int64_t p = 0; p < pixels; ++p)
          target[p] = static_cast<float>(source[p]) * scale - mean;
      }
      slot->labels[t] = static_cast<float>(data_->labels[sample]);
    }
  }

  // Whether `sample` is served mirrored in `epoch`: a coin from the seed, the epoch and the
  // sample, so a batch's pixels depend on nothing else (threads, ranks, resumes).
  bool mirrored(int64_t epoch, int64_t sample) const {
    if (!plan_.mirror) return false;
    const uint64_t key = splitmix64(static_cast<uint64_t>(epoch)) ^ static_cast<uint64_t>(sample);
    return (splitmix64(plan_.seed ^ splitmix64(key)) >> 63) != 0;
  }

  const BatchPlan plan_;
  const std::string dir_;
  const std::string split_;
  const int rows_;
  const int cols_;
  const int classes_;
  const float scale_;
  const float mean_;
  // Producer-only state.
  std::shared_ptr<const IdxDataset> data_;
  EpochOrders orders_;
  const int64_t first_batch_;
  // Consumer-only state.
  int64_t next_take_;

  std::mutex mutex_;
  std::condition_variable cv_;
  Slot slots_[2];
  bool stop_ = false;         // guarded by mutex_
  std::exception_ptr error_;  // guarded by mutex_
  std::thread thread_;        // started last, joined first
};

IdxDataOp::IdxDataOp(Attrs attrs)
    : TypedOperator(std::move(attrs)),
      dir_(attrs_.get_string("dir", kDefaultIdxDir)),
      split_(attrs_.get_string("split", "train")),
      batch_(checked_batch(attrs_)),
      rank_(checked_rank(attrs_)),
      ranks_(checked_ranks(attrs_)),
      shuffle_(checked_flag(attrs_, "shuffle", split_ == "train" ? 1 : 0)),
      drop_last_(checked_flag(attrs_, "drop_last", 1)),
      mirror_(checked_flag(attrs_, "mirror", 0)),
      seed_(static_cast<uint64_t>(attrs_.get_int("seed", 1))),
      scale_(checked_float(attrs_, "scale", 1.0 / 255.0)),
      mean_(checked_float(attrs_, "mean", 0.0)),
      classes_attr_(checked_classes(attrs_)) {
  const IdxDataset meta = cached_idx_metadata(dir_, split_);
  if (classes_attr_ > 0) check_idx_labels(meta, classes_attr_);
  samples_ = meta.count;
  rows_ = meta.rows;
  cols_ = meta.cols;
  classes_ = classes_attr_ > 0 ? classes_attr_ : meta.classes;
  const int64_t global = batch_ * ranks_;
  require(samples_ >= (drop_last_ ? global : 1), "idx_data: the ", split_, " split in ", dir_,
          " has ", samples_, " samples, fewer than one global batch of ", global, " (batch ",
          batch_, " x ", ranks_, " ranks); lower 'batch' or set drop_last=0");
  batches_per_epoch_ = drop_last_ ? samples_ / global : (samples_ + global - 1) / global;
}

IdxDataOp::~IdxDataOp() = default;

std::vector<Shape> IdxDataOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 2);
  return {Shape{batch_, 1, rows_, cols_}, Shape{batch_}};
}

void IdxDataOp::skip_to(int64_t batch) {
  require(!prefetcher_, type(), ": skip_to must come before the first batch is served");
  require(batch >= 0, type(), ": cannot skip to batch ", batch);
  served_ = batch;
}

void IdxDataOp::rewind() {
  prefetcher_.reset();  // stops its thread; the next compute() starts one at batch 0
  served_ = 0;
}

int64_t IdxDataOp::epoch() const { return served_ == 0 ? -1 : (served_ - 1) / batches_per_epoch_; }

void IdxDataOp::compute_cpu(const std::vector<const Tensor*>&, const std::vector<Tensor*>& outputs,
                            OpContext&) {
  if (!prefetcher_) {
    BatchPlan plan;
    plan.count = samples_;
    plan.batch = batch_;
    plan.rank = rank_;
    plan.ranks = ranks_;
    plan.shuffle = shuffle_;
    plan.drop_last = drop_last_;
    plan.mirror = mirror_;
    plan.seed = seed_;
    prefetcher_ = std::make_unique<Prefetcher>(plan, dir_, split_, rows_, cols_, classes_, scale_,
                                               mean_, served_);
  }
  const Prefetcher::Served served =
      prefetcher_->take(outputs[0]->mutable_data(), outputs[1]->mutable_data());
  ++served_;
  last_valid_ = served.valid;
}

PURINE_REGISTER_OPERATOR(IdxDataOp);

}  // namespace purine
