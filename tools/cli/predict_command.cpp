#include "tools/cli/predict_command.hpp"

#include <gflags/gflags.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "base/error.hpp"
#include "train/predictor.hpp"

DECLARE_string(model);
DECLARE_string(data);
DECLARE_string(checkpoint);
DECLARE_int32(classes);
DECLARE_double(input_mean);
DECLARE_double(input_std);
DECLARE_int32(threads);
DECLARE_int64(test_samples);
DEFINE_string(image, "",
              "predict: classify this binary PGM image (P5, 8 bits) instead of evaluating the "
              "test split of --data");
DEFINE_int32(top, 5, "predict --image: print this many classes, most probable first");
DEFINE_int32(predict_batch, 100, "predict: images per batch on the test split");
DEFINE_bool(weights_only, false,
            "export: write the checkpoint's parameters and states without its optimizer "
            "states (the only export so far)");
DEFINE_string(output, "", "export, graph: the file to write (graph: MODEL.FORMAT by default)");
DEFINE_string(forward_graph, "",
              "export: write the model's forward graph (images in, probabilities out; no "
              "weights) here, .pb or .pbtxt, for import_graph (purine/serialize.hpp)");

namespace purine::cli {

namespace {

// The pixels of a binary PGM (P5, maxval 255) as a [1, 1, H, W] tensor, standardized.
Tensor read_pgm(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  require(in.good(), "--image=", path, ": cannot open it");
  std::string magic;
  int64_t width = 0, height = 0, maxval = 0;
  in >> magic;
  // Header fields may be separated by comments ("# ...") and white space.
  auto field = [&](int64_t* value) {
    in >> std::ws;
    while (in.peek() == '#') {
      std::string comment;
      std::getline(in, comment);
      in >> std::ws;
    }
    in >> *value;
  };
  if (magic == "P5") {
    field(&width);
    field(&height);
    field(&maxval);
  }
  require(magic == "P5" && in.good() && width > 0 && height > 0 && maxval == 255, "--image=", path,
          ": not a binary 8-bit PGM (P5 with maxval 255); convert it first, e.g. with "
          "ImageMagick: convert IMAGE -colorspace gray -depth 8 FILE.pgm");
  in.get();  // the single white-space character before the pixels
  std::vector<unsigned char> pixels(static_cast<size_t>(width * height));
  in.read(reinterpret_cast<char*>(pixels.data()), static_cast<std::streamsize>(pixels.size()));
  require(in.gcount() == static_cast<std::streamsize>(pixels.size()), "--image=", path,
          ": the file ends after ", in.gcount(), " of its ", pixels.size(), " pixels");
  std::vector<float> values;
  for (unsigned char p : pixels)
    values.push_back(static_cast<float>((p / 255.0 - FLAGS_input_mean) / FLAGS_input_std));
  Tensor t(Shape{1, 1, height, width});
  t.set_values(values);
  return t;
}

PredictorOptions predictor_options(const Shape& image) {
  require(!FLAGS_checkpoint.empty(),
          "give the trained weights: --checkpoint=FILE (a checkpoint "
          "of purine train, or a file of purine export --weights-only)");
  PredictorOptions o;
  o.model = FLAGS_model;
  o.weights = FLAGS_checkpoint;
  o.classes = FLAGS_classes;
  o.threads = FLAGS_threads;
  o.images = image;
  return o;
}

}  // namespace

// The flags predict and export share with train, in their own words.
const char kModelHelp[] = "the model the checkpoint was trained as (`purine models` lists them)";
const char kClassesHelp[] = "classes of the model's output, as it was trained with";

std::vector<FlagHelp> predict_flags() {
  return {
      {"model", kModelHelp},
      {"checkpoint",
       "the trained weights to predict with: a checkpoint of purine train (--checkpoint=FILE, "
       "or a ckpt-<iteration>.purine of --checkpoint-dir) or a file of purine export "
       "--weights-only"},
      {"image",
       "classify this binary PGM image (P5, 8 bits) instead of evaluating the test "
       "split of --data"},
      {"top", "with --image: print this many classes, most probable first"},
      {"data",
       "without --image: the directory whose test split (t10k-*, IDX files) is "
       "evaluated; its accuracy and confusion matrix are printed"},
      {"test_samples", "without --image: evaluate on the first N test images (0: all)"},
      {"predict_batch", "without --image: test images per batch"},
      {"classes", kClassesHelp},
      {"input_mean",
       "images are standardized as in training, (pixel / 255 - mean) / std: give "
       "the values the model was trained with (default: Fashion-MNIST's)"},
      {"input_std", "the standard deviation of --input-mean's standardization"},
      {"threads", "compute threads of the forward passes (bounds BLAS and oneDNN too), 1 to 1024"},
  };
}
std::vector<FlagHelp> export_flags() {
  return {
      {"model", kModelHelp},
      {"checkpoint",
       "with --weights-only: the checkpoint to read (of purine train: --checkpoint=FILE, or a "
       "ckpt-<iteration>.purine of --checkpoint-dir)"},
      {"weights_only",
       "write the parameters and states of --checkpoint, without its "
       "optimizer states, to --output"},
      {"output", "with --weights-only: the file to write"},
      {"forward_graph",
       "write the model's forward graph (images in, probabilities out; no "
       "weights) to this file, .pb or .pbtxt, for import_graph "
       "(purine/serialize.hpp)"},
      {"predict_batch", "with --forward-graph: the batch of images the graph is built for"},
      {"data",
       "the directory of the data set whose images the model takes (their shape "
       "sizes the model's input)"},
      {"classes", kClassesHelp},
  };
}

int run_predict() {
  require(FLAGS_top >= 1, "--top must be at least 1, got ", FLAGS_top);
  if (!FLAGS_image.empty()) {
    const Tensor image = read_pgm(FLAGS_image);
    Predictor predictor(predictor_options(image.shape()));
    const Tensor probabilities = predictor.probabilities(image);
    const std::vector<float> p = probabilities.values();
    std::printf("%s:", FLAGS_image.c_str());
    const std::vector<std::vector<int64_t>> best = top_k(probabilities, FLAGS_top);
    for (int64_t c : best[0]) std::printf(" class %lld (%.3f)", static_cast<long long>(c), p[c]);
    std::printf("\n");
    return 0;
  }
  require(FLAGS_predict_batch >= 1, "--predict-batch must be at least 1, got ",
          FLAGS_predict_batch);
  const Shape image = test_image_shape(FLAGS_data);
  const PredictorOptions o = predictor_options({FLAGS_predict_batch, image[0], image[1], image[2]});
  const Evaluation e =
      evaluate_test_split(o, FLAGS_data, FLAGS_input_mean, FLAGS_input_std, FLAGS_test_samples);
  std::printf("%s on %lld test images of %s: accuracy %.4f\n", FLAGS_model.c_str(),
              static_cast<long long>(e.samples), FLAGS_data.c_str(), e.accuracy);
  std::printf("confusion matrix (rows: true class, columns: predicted class)\n      ");
  for (size_t c = 0; c < e.confusion.size(); ++c) std::printf(" %5zu", c);
  std::printf("\n");
  for (size_t t = 0; t < e.confusion.size(); ++t) {
    std::printf("%5zu ", t);
    for (int64_t n : e.confusion[t]) std::printf(" %5lld", static_cast<long long>(n));
    std::printf("\n");
  }
  return 0;
}

int run_export() {
  if (!FLAGS_forward_graph.empty()) {
    const Shape image = test_image_shape(FLAGS_data);
    PredictorOptions o;
    o.model = FLAGS_model;
    o.classes = FLAGS_classes;
    o.images = {FLAGS_predict_batch, image[0], image[1], image[2]};
    export_forward_graph(o, FLAGS_forward_graph);
    std::printf("wrote the forward graph of %s for batches of %d to %s\n", FLAGS_model.c_str(),
                FLAGS_predict_batch, FLAGS_forward_graph.c_str());
    if (!FLAGS_weights_only) return 0;
  }
  require(FLAGS_weights_only,
          "give what to export: --weights-only (with --checkpoint and "
          "--output) or --forward-graph=FILE (the training graph is exported by purine train "
          "--export-graph=FILE)");
  require(!FLAGS_output.empty(), "give the file to write: --output=FILE");
  const Shape image = test_image_shape(FLAGS_data);
  export_weights(predictor_options({1, image[0], image[1], image[2]}), FLAGS_output);
  std::printf("wrote the weights of %s from %s to %s\n", FLAGS_model.c_str(),
              FLAGS_checkpoint.c_str(), FLAGS_output.c_str());
  return 0;
}

}  // namespace purine::cli
