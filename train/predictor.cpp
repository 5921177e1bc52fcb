#include "train/predictor.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "base/error.hpp"
#include "graphs/channel_blocks.hpp"
#include "graphs/fusion.hpp"
#include "models/models.hpp"
#include "operators/conv.hpp"
#include "operators/data_source.hpp"
#include "operators/registry.hpp"
#include "purine/graph.hpp"
#include "purine/runnable.hpp"

namespace purine {

namespace {

// The model's forward graph on `images` with class probabilities; where `fuse`, fused and its
// activations in channel blocks (graphs/channel_blocks.hpp), as training runs them.
Blob* build_forward(Graph& g, const PredictorOptions& o, Blob* images, bool fuse) {
  ModelSpec spec;
  spec.training = false;
  spec.classes = o.classes;
  Blob* logits = find_model(o.model)(g, images, spec);
  Blob* probabilities = g.apply("softmax", "softmax", {}, {logits}, {"probabilities"})[0];
  if (fuse) {
    fuse_forward(g, /*siblings=*/true);
    block_channels(g, conv_channel_block());
  }
  return probabilities;
}

CheckpointInfo load_weights(Graph& g, const std::string& model, const std::string& path) {
  CheckpointExpectation expected;
  expected.model = model;
  expected.map_only = true;
  return load_checkpoint(whole_blobs(g), path, expected);
}

// A forward graph read only at `observed` blobs after each run: every other activation can
// take the memory of one already consumed.
RunOptions run_options(int threads, std::set<const Blob*> observed) {
  RunOptions run;
  run.compute_threads = threads;
  run.rank = 0;
  run.world_size = 1;
  run.reuse_memory = true;
  run.observed = std::move(observed);
  return run;
}

void check_options(const PredictorOptions& o) {
  require(o.images.ndim() == 4 && o.images.count() > 0, "predictor: images must be [batch, C, H, ",
          "W] with positive sizes, got ", o.images);
  require(o.classes > 0, "predictor: classes must be positive, got ", o.classes);
  require(o.threads > 0, "predictor: threads must be positive, got ", o.threads);
}

}  // namespace

class Predictor::Impl {
 public:
  explicit Impl(const PredictorOptions& o) : graph_("predict") {
    check_options(o);
    images_ = graph_.add_blob("images", o.images);
    probabilities_ = build_forward(graph_, o, images_, o.fuse);
    info_ = load_weights(graph_, o.model, o.weights);
    run_ = std::make_unique<Runnable>(graph_, run_options(o.threads, {probabilities_}));
  }

  Tensor probabilities(const Tensor& images) {
    const Shape& batch = images_->shape();
    const int64_t n = images.shape().ndim() == 4 ? images.shape()[0] : -1;
    require(n >= 1 && n <= batch[0] && images.shape().count_from(1) == batch.count_from(1),
            "predictor: images of shape ", images.shape(), " for a model built for up to ",
            batch[0], " images of ", Shape({batch[1], batch[2], batch[3]}));
    std::vector<float> values = images.values();
    values.resize(batch.count(), 0.0f);  // rows beyond n: computed, not returned
    images_->tensor().set_values(values);
    run_->run();
    const std::vector<float> all = probabilities_->tensor().values();
    const int64_t classes = probabilities_->shape()[1];
    Tensor out(Shape{n, classes});
    out.set_values(std::vector<float>(all.begin(), all.begin() + n * classes));
    return out;
  }

  const CheckpointInfo& info() const { return info_; }
  const Graph& graph() const { return graph_; }

 private:
  Graph graph_;
  Blob* images_ = nullptr;
  Blob* probabilities_ = nullptr;
  CheckpointInfo info_;
  std::unique_ptr<Runnable> run_;
};

Predictor::Predictor(const PredictorOptions& options) : impl_(std::make_unique<Impl>(options)) {}
Predictor::~Predictor() = default;
Tensor Predictor::probabilities(const Tensor& images) { return impl_->probabilities(images); }
const CheckpointInfo& Predictor::info() const { return impl_->info(); }
const Graph& Predictor::graph() const { return impl_->graph(); }

std::vector<std::vector<int64_t>> top_k(const Tensor& probabilities, int k) {
  require(probabilities.shape().ndim() == 2, "top_k: probabilities must be [n, classes], got ",
          probabilities.shape());
  const int64_t n = probabilities.shape()[0], classes = probabilities.shape()[1];
  require(k >= 1, "top_k: k must be at least 1, got ", k);
  const std::vector<float> p = probabilities.values();
  std::vector<std::vector<int64_t>> best(n);
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t>& row = best[i];
    row.resize(classes);
    std::iota(row.begin(), row.end(), 0);
    const float* pi = p.data() + i * classes;
    std::stable_sort(row.begin(), row.end(), [&](int64_t a, int64_t b) { return pi[a] > pi[b]; });
    row.resize(std::min<int64_t>(k, classes));
  }
  return best;
}

Evaluation evaluate_test_split(const PredictorOptions& o, const std::string& data_dir, double mean,
                               double std, int64_t samples) {
  check_options(o);
  Graph g("evaluate");
  const int64_t batch = o.images[0];
  Attrs attrs;
  attrs.set("dir", data_dir)
      .set("split", "test")
      .set("batch", batch)
      .set("shuffle", 0)
      .set("classes", o.classes)
      .set("scale", 1.0 / (255.0 * std))
      .set("mean", mean / std);
  const std::vector<Blob*> data = g.apply("data", "idx_data", attrs, {}, {"images", "labels"});
  const DataSource* source = data[0]->writers()[0]->kernel().data_source();
  require(data[0]->shape() == o.images, "the test images of '", data_dir, "' come as ",
          data[0]->shape(), "; the model was asked for ", o.images);
  Blob* probabilities = build_forward(g, o, data[0], o.fuse);
  load_weights(g, o.model, o.weights);
  Runnable run(g, run_options(o.threads, {probabilities, data[1]}));

  const int64_t available = source->samples();
  samples = samples > 0 ? std::min(samples, available) : available;
  const int64_t batches = samples / batch;
  require(batches > 0, "the test split of '", data_dir, "' has ", available,
          " samples; evaluating ", samples, " needs at least one batch of ", batch);
  Evaluation e;
  e.samples = batches * batch;
  e.confusion.assign(o.classes, std::vector<int64_t>(o.classes, 0));
  int64_t correct = 0;
  for (int64_t b = 0; b < batches; ++b) {
    run.run();
    const std::vector<std::vector<int64_t>> best = top_k(probabilities->tensor(), 1);
    const std::vector<float> labels = data[1]->tensor().values();
    for (int64_t i = 0; i < batch; ++i) {
      const int64_t truth = static_cast<int64_t>(labels[i]), guess = best[i][0];
      ++e.confusion[truth][guess];
      correct += truth == guess;
    }
  }
  e.accuracy = static_cast<double>(correct) / static_cast<double>(e.samples);
  return e;
}

void export_weights(const PredictorOptions& o, const std::string& path) {
  check_options(o);
  Graph g("export");
  build_forward(g, o, g.add_blob("images", o.images), false);
  const CheckpointInfo info = load_weights(g, o.model, o.weights);
  CheckpointInfo out;
  out.model = info.model;
  out.iteration = info.iteration;
  out.layout = "weights";
  save_checkpoint(whole_blobs(g), path, out);
}

void export_forward_graph(const PredictorOptions& o, const std::string& path) {
  check_options(o);
  Graph g(o.model);
  // Every op as the model writes it: the file is read by other tools too.
  build_forward(g, o, g.add_blob("images", o.images), false);
  g.validate();
  export_graph(g, path);
}

Shape test_image_shape(const std::string& data_dir) {
  Attrs attrs;
  attrs.set("dir", data_dir).set("split", "test").set("batch", 1);
  const std::unique_ptr<Operator> op = OperatorRegistry::create("idx_data", attrs);
  const DataSource* source = op->data_source();
  require(source != nullptr, "the idx_data operator is no DataSource");
  return {1, source->rows(), source->cols()};
}

std::vector<TestImage> read_test_images(const std::string& data_dir, int64_t count) {
  require(count >= 1, "read_test_images: count must be at least 1, got ", count);
  const int64_t available = [&] {
    Attrs attrs;
    attrs.set("dir", data_dir).set("split", "test").set("batch", 1);
    const std::unique_ptr<Operator> op = OperatorRegistry::create("idx_data", attrs);
    return op->data_source()->samples();
  }();
  count = std::min(count, available);
  Graph g("test_images");
  Attrs attrs;
  attrs.set("dir", data_dir)
      .set("split", "test")
      .set("batch", count)
      .set("shuffle", 0)
      .set("scale", 1.0)
      .set("mean", 0.0);
  const std::vector<Blob*> data = g.apply("data", "idx_data", attrs, {}, {"images", "labels"});
  Runnable run(g, run_options(1, {data[0], data[1]}));
  run.run();
  const Shape& shape = data[0]->shape();  // [count, 1, rows, cols]
  const std::vector<float> pixels = data[0]->tensor().values();
  const std::vector<float> labels = data[1]->tensor().values();
  const int64_t size = shape.count_from(1);
  std::vector<TestImage> images(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    TestImage& image = images[i];
    image.label = static_cast<int64_t>(labels[i]);
    image.rows = shape[2];
    image.cols = shape[3];
    for (int64_t j = 0; j < size; ++j)
      image.pixels.push_back(static_cast<unsigned char>(std::lround(pixels[i * size + j])));
  }
  return images;
}

}  // namespace purine
