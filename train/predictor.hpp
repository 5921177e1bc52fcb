// Inference: a model's forward graph at any batch size, its weights loaded by name from a
// checkpoint or a weights file (purine export --weights-only). Files hold every tensor by its
// single-device name ("mlp::fc1::weight") whatever layout trained it (data, pipeline, model
// parallel), so any of them loads here; a training checkpoint's optimizer states are skipped.
//   Predictor p({"mlp", "ckpt.purine", {1, 1, 28, 28}});
//   Tensor probs = p.probabilities(images);          // [n, classes]
//   std::vector<std::vector<int64_t>> best = top_k(probs, 5);
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/shape.hpp"
#include "base/tensor.hpp"
#include "purine/graph.hpp"
#include "purine/serialize.hpp"

namespace purine {

struct PredictorOptions {
  std::string model;    // a registered model (models/models.hpp)
  std::string weights;  // a checkpoint or weights file of that model
  Shape images;         // [batch, C, H, W]: the most images one call takes, and their size
  int64_t classes = 10;
  int threads = 2;
  // Conv + bias + relu chains and bias + relu pairs run as one op each (graphs/fusion.hpp), and
  // activations between convolutions are held in channel blocks (graphs/channel_blocks.hpp), as
  // in training: the same probabilities, bit for bit. False keeps every op and tensor plain.
  bool fuse = true;
};

class Predictor {
 public:
  // Throws purine::Error naming the file and the tensor when the weights do not fit the model.
  explicit Predictor(const PredictorOptions& options);
  ~Predictor();
  Predictor(const Predictor&) = delete;
  Predictor& operator=(const Predictor&) = delete;

  // Class probabilities [n, classes] of `images` [n, C, H, W] (standardized as in training),
  // n at most the batch.
  Tensor probabilities(const Tensor& images);
  // What the weights file records (model, iteration).
  const CheckpointInfo& info() const;
  // The forward graph it runs (its ops, fused or not; its weights as loaded).
  const Graph& graph() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// For each row of `probabilities` [n, classes], the `k` most probable classes, most probable
// first (ties: the lower class first).
std::vector<std::vector<int64_t>> top_k(const Tensor& probabilities, int k);

// A model on the test split of an IDX data set.
struct Evaluation {
  int64_t samples = 0;
  double accuracy = 0;
  std::vector<std::vector<int64_t>> confusion;  // [true class][predicted class]: counts
};
// Evaluates on `samples` test images of `data_dir` (0: all), in batches of options.images[0]
// (a last partial batch included); pixels standardized as (pixel / 255 - mean) / std.
Evaluation evaluate_test_split(const PredictorOptions& options, const std::string& data_dir,
                               double mean, double std, int64_t samples = 0);

// Writes the model's parameters and states from `options.weights` (a training checkpoint: its
// optimizer states are left out) to `path`, a smaller file of the same format, which
// Predictor loads like a checkpoint.
void export_weights(const PredictorOptions& options, const std::string& path);

// Writes the model's forward graph for options.images (a blob "images" in, "probabilities" out;
// weights not included) with export_graph (.pb or .pbtxt). import_graph rebuilds it anywhere;
// load_tensors_by_name then sets its weights from a checkpoint (purine/serialize.hpp).
void export_forward_graph(const PredictorOptions& options, const std::string& path);

// The size [C, H, W] of the images of an IDX data set's test split (reads its header).
Shape test_image_shape(const std::string& data_dir);

// One image of an IDX data set's test split as stored: its true class and its 8-bit pixels,
// row by row.
struct TestImage {
  int64_t label = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<unsigned char> pixels;
};
// The first `count` images of the test split of `data_dir` (fewer when it has fewer), in the
// file's order.
std::vector<TestImage> read_test_images(const std::string& data_dir, int64_t count);

}  // namespace purine
