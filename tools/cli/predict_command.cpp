#include "tools/cli/predict_command.hpp"

#include <gflags/gflags.h>
#include <sys/stat.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "base/error.hpp"
#include "purine/serialize.hpp"
#include "tools/cli/image_file.hpp"
#include "tools/cli/train_command.hpp"
#include "train/onnx_export.hpp"
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
              "predict: classify this image (PNG or binary PGM, converted to 8-bit grayscale) "
              "instead of evaluating the test split of --data");
DEFINE_string(labels, "",
              "predict: a file of class names, one per line (default: Fashion-MNIST's with the "
              "default --data and --classes)");
DEFINE_string(write_samples, "",
              "predict: write --count test images of --data to this directory as image files "
              "(--sample-format)");
DEFINE_string(sample_format, "png",
              "predict --write-samples: the format of the images written, png or pgm");
DEFINE_int32(count, 10, "predict --write-samples: how many test images to write");
DEFINE_int32(top, 5, "predict --image: print this many classes, most probable first");
DEFINE_int32(predict_batch, 100, "predict: images per batch on the test split");
DEFINE_bool(weights_only, false,
            "export: write the checkpoint's parameters and states without its optimizer "
            "states (the only export so far)");
DEFINE_string(output, "", "export, graph: the file to write (graph: MODEL.FORMAT by default)");
DEFINE_string(forward_graph, "",
              "export: write the model's forward graph (images in, probabilities out; no "
              "weights) here, .pb or .pbtxt, for import_graph (purine/serialize.hpp)");
DEFINE_string(onnx, "",
              "export: write the model's forward graph with the weights of --checkpoint here as "
              "an ONNX model (images in, probabilities out)");

namespace purine::cli {

namespace {

// The image as a [1, 1, H, W] tensor, standardized as in training.
Tensor standardized(const GrayImage& image) {
  std::vector<float> values;
  for (unsigned char p : image.pixels)
    values.push_back(static_cast<float>((p / 255.0 - FLAGS_input_mean) / FLAGS_input_std));
  Tensor t(Shape{1, 1, image.height, image.width});
  t.set_values(values);
  return t;
}

bool flag_given(const char* name) { return !gflags::GetCommandLineFlagInfoOrDie(name).is_default; }

// The model to predict with: --model, or, when it is not given, the one the checkpoint records.
struct ModelChoice {
  std::string name;
  bool from_checkpoint = false;
};
ModelChoice choose_model() {
  if (FLAGS_checkpoint.empty()) return {FLAGS_model, false};
  const std::string recorded = checkpoint_model(FLAGS_checkpoint);
  if (recorded.empty()) return {FLAGS_model, false};
  if (flag_given("model")) {
    // Said before the file is read against the other model's size.
    require(FLAGS_model == recorded, "checkpoint '", FLAGS_checkpoint, "' is of model '", recorded,
            "', not --model=", FLAGS_model, " (leave --model out to use the checkpoint's)");
    return {FLAGS_model, false};
  }
  return {recorded, true};
}

// Class names: --labels, else Fashion-MNIST's for the default data set of 10 classes, else none.
std::vector<std::string> class_names() {
  if (FLAGS_labels.empty()) {
    const bool fashion_mnist =
        FLAGS_classes == 10 &&
        FLAGS_data == gflags::GetCommandLineFlagInfoOrDie("data").default_value;
    if (!fashion_mnist) return {};
    return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
            "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  }
  std::ifstream in(FLAGS_labels);
  require(in.good(), "--labels=", FLAGS_labels, ": cannot open it");
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    names.push_back(line);
  }
  while (!names.empty() && names.back().empty()) names.pop_back();
  require(static_cast<int64_t>(names.size()) == FLAGS_classes, "--labels=", FLAGS_labels, " has ",
          names.size(), " names, one per line; the model has ", FLAGS_classes,
          " classes (--classes)");
  return names;
}

// "class 7 Sneaker", or "class 7" without names.
std::string class_label(const std::vector<std::string>& names, int64_t c) {
  std::string label = "class " + std::to_string(c);
  if (c < static_cast<int64_t>(names.size())) label += " " + names[c];
  return label;
}

void require_checkpoint() {
  require(!FLAGS_checkpoint.empty(),
          "give the trained weights: --checkpoint=FILE (a checkpoint "
          "of purine train, or a file of purine export --weights-only)");
}

PredictorOptions predictor_options(const std::string& model, const Shape& image) {
  require_checkpoint();
  PredictorOptions o;
  o.model = model;
  o.weights = FLAGS_checkpoint;
  o.classes = FLAGS_classes;
  o.threads = threads_from_flag();
  o.images = image;
  return o;
}

}  // namespace

// The flags predict and export share with train, in their own words.
const char kModelHelp[] =
    "the model the checkpoint was trained as (default: the one the checkpoint records; "
    "`purine models` lists them)";
const char kClassesHelp[] = "classes of the model's output, as it was trained with";

std::vector<FlagHelp> predict_flags() {
  return {
      {"model", kModelHelp},
      {"checkpoint",
       "the trained weights to predict with: a checkpoint of purine train (--checkpoint=FILE, "
       "or a ckpt-<iteration>.purine of --checkpoint-dir) or a file of purine export "
       "--weights-only"},
      {"image",
       "classify this image instead of evaluating the test split of --data: a PNG (gray, "
       "colour, palette, 16-bit, interlaced; colour to gray by (299 R + 587 G + 114 B) / 1000, "
       "alpha onto black) or a binary PGM (P5), told apart by the file's first bytes, of the "
       "model's image size"},
      {"top", "with --image: print this many classes, most probable first"},
      {"labels",
       "class names, one per line, printed beside the class numbers (default: "
       "Fashion-MNIST's ten with the default --data and --classes=10)"},
      {"write_samples",
       "write --count test images of --data to this directory as 8-bit grayscale image files "
       "named by index and true class (0007-sneaker.png), to try --image with"},
      {"count", "with --write-samples: how many test images to write"},
      {"sample_format", "with --write-samples: the format of the images, png or pgm"},
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
      {"threads",
       "compute threads of the forward passes (bounds BLAS and oneDNN too), 1 to 1024; "
       "0 (the default): one per physical core this process may run on"},
  };
}
std::vector<FlagHelp> export_flags() {
  return {
      {"model", kModelHelp},
      {"checkpoint",
       "with --weights-only or --onnx: the checkpoint to read (of purine train: "
       "--checkpoint=FILE, or a "
       "ckpt-<iteration>.purine of --checkpoint-dir)"},
      {"weights_only",
       "write the parameters and states of --checkpoint, without its "
       "optimizer states, to --output"},
      {"output", "with --weights-only: the file to write"},
      {"forward_graph",
       "write the model's forward graph (images in, probabilities out; no "
       "weights) to this file, .pb or .pbtxt, for import_graph "
       "(purine/serialize.hpp)"},
      {"onnx",
       "write the model's forward graph with the weights of --checkpoint to this file as an "
       "ONNX model (opset 13): input \"images\" [batch, C, H, W] standardized as in training "
       "(--input-mean, --input-std), output \"probabilities\" [batch, classes], the softmax "
       "purine predict prints; batch is symbolic. An op without an ONNX mapping is refused, "
       "naming it, and nothing is written. Needs a build with libonnx-dev"},
      {"predict_batch", "with --forward-graph: the batch of images the graph is built for"},
      {"data",
       "the directory of the data set whose images the model takes (their shape "
       "sizes the model's input)"},
      {"classes", kClassesHelp},
  };
}

namespace {

// A Predictor for `image`. When the image's size differs from --data's, first checks that the
// checkpoint takes images of --data's size, so that a wrong-size image is reported as such
// rather than as a tensor of the checkpoint that does not fit.
std::unique_ptr<Predictor> predictor_for(const ModelChoice& model, const GrayImage& image) {
  const Shape shape{1, 1, image.height, image.width};
  Shape expected;  // [C, H, W] of --data's images, where it can be read
  try {
    expected = test_image_shape(FLAGS_data);
  } catch (const Error&) {
  }
  if (expected.ndim() != 3 || (expected[1] == image.height && expected[2] == image.width))
    return std::make_unique<Predictor>(predictor_options(model.name, shape));
  try {
    Predictor at_data_size(
        predictor_options(model.name, {1, expected[0], expected[1], expected[2]}));
  } catch (const Error&) {
    // Not of --data's size either: the checkpoint may be of other images; if it does not fit
    // those either, the error at --data's size says why.
    try {
      return std::make_unique<Predictor>(predictor_options(model.name, shape));
    } catch (const Error&) {
    }
    throw;
  }
  throw Error(str("--image=", FLAGS_image, " is ", image.width, "x", image.height, "; model '",
                  model.name, "' takes ", expected[2], "x", expected[1],
                  expected[0] == 1 ? " grayscale" : "", " images (the checkpoint's)"));
}

std::string describe(const ModelChoice& model, const Predictor& predictor) {
  return str("model ", model.name, model.from_checkpoint ? " (the checkpoint's)" : "",
             ", iteration ", predictor.info().iteration, " of ", FLAGS_checkpoint);
}

int predict_image(const ModelChoice& model, const std::vector<std::string>& names) {
  const GrayImage image = read_gray_image(FLAGS_image, "--image=" + FLAGS_image);
  const std::unique_ptr<Predictor> predictor = predictor_for(model, image);
  const Tensor probabilities = predictor->probabilities(standardized(image));
  const std::vector<float> p = probabilities.values();
  std::printf("%s\n%s:", describe(model, *predictor).c_str(), FLAGS_image.c_str());
  const std::vector<std::vector<int64_t>> best = top_k(probabilities, FLAGS_top);
  const char* separator = " ";
  for (int64_t c : best[0]) {
    std::printf("%s%s (%.3f)", separator, class_label(names, c).c_str(), p[c]);
    separator = ", ";
  }
  std::printf("\n");
  return 0;
}

// "t-shirt-top" for "T-shirt/top": lower case, each run of other characters one '-'.
std::string file_name_part(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!out.empty() && out.back() != '-')
      out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

int write_samples(const std::vector<std::string>& names) {
  require(FLAGS_count >= 1, "--count must be at least 1, got ", FLAGS_count);
  const ImageFormat format = parse_image_format(FLAGS_sample_format, "--sample-format");
  const std::string& dir = FLAGS_write_samples;
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) mkdir(dir.c_str(), 0777);
  require(stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode), "--write-samples=", dir,
          ": cannot create that directory");
  const std::vector<TestImage> images = read_test_images(FLAGS_data, FLAGS_count);
  const std::string prefix = dir.back() == '/' ? dir : dir + "/";
  std::string first;
  for (size_t i = 0; i < images.size(); ++i) {
    const TestImage& image = images[i];
    const std::string label = image.label < static_cast<int64_t>(names.size())
                                  ? file_name_part(names[image.label])
                                  : "class" + std::to_string(image.label);
    char index[32];
    std::snprintf(index, sizeof index, "%04zu-", i);
    const std::string path = prefix + index + label + "." + image_format_extension(format);
    write_gray_image(path, {image.cols, image.rows, image.pixels}, format);
    if (first.empty()) first = path;
    std::printf("%s: %s\n", path.c_str(), class_label(names, image.label).c_str());
  }
  std::printf(
      "wrote %zu test images of %s; classify one with: purine predict "
      "--checkpoint=FILE --image=%s\n",
      images.size(), FLAGS_data.c_str(), first.c_str());
  return 0;
}

}  // namespace

int run_predict() {
  require(FLAGS_top >= 1, "--top must be at least 1, got ", FLAGS_top);
  const std::vector<std::string> names = class_names();
  if (!FLAGS_write_samples.empty()) return write_samples(names);
  require_checkpoint();
  const ModelChoice model = choose_model();
  if (!FLAGS_image.empty()) return predict_image(model, names);
  require(FLAGS_predict_batch >= 1, "--predict-batch must be at least 1, got ",
          FLAGS_predict_batch);
  const Shape image = test_image_shape(FLAGS_data);
  const PredictorOptions o =
      predictor_options(model.name, {FLAGS_predict_batch, image[0], image[1], image[2]});
  const Evaluation e =
      evaluate_test_split(o, FLAGS_data, FLAGS_input_mean, FLAGS_input_std, FLAGS_test_samples);
  std::printf("%s%s on %lld test images of %s: accuracy %.4f\n", model.name.c_str(),
              model.from_checkpoint ? " (the checkpoint's)" : "", static_cast<long long>(e.samples),
              FLAGS_data.c_str(), e.accuracy);
  std::printf("confusion matrix (rows: true class, columns: predicted class)\n      ");
  for (size_t c = 0; c < e.confusion.size(); ++c) std::printf(" %5zu", c);
  std::printf("\n");
  for (size_t t = 0; t < e.confusion.size(); ++t) {
    std::printf("%5zu ", t);
    for (int64_t n : e.confusion[t]) std::printf(" %5lld", static_cast<long long>(n));
    if (t < names.size()) std::printf("  %s", names[t].c_str());
    std::printf("\n");
  }
  return 0;
}

int run_export() {
  const std::string model = choose_model().name;
  if (!FLAGS_onnx.empty()) {
    require(onnx_export_supported(),
            "--onnx: this build of purine lacks ONNX export (libonnx-dev was not found when it "
            "was configured); install libonnx-dev (tools/setup.sh), re-run cmake and rebuild");
    const Shape image = test_image_shape(FLAGS_data);
    export_onnx(predictor_options(model, {1, image[0], image[1], image[2]}), FLAGS_onnx);
    std::printf("wrote the ONNX model of %s with the weights of %s to %s\n", model.c_str(),
                FLAGS_checkpoint.c_str(), FLAGS_onnx.c_str());
    if (FLAGS_forward_graph.empty() && !FLAGS_weights_only) return 0;
  }
  if (!FLAGS_forward_graph.empty()) {
    const Shape image = test_image_shape(FLAGS_data);
    PredictorOptions o;
    o.model = model;
    o.classes = FLAGS_classes;
    o.images = {FLAGS_predict_batch, image[0], image[1], image[2]};
    export_forward_graph(o, FLAGS_forward_graph);
    std::printf("wrote the forward graph of %s for batches of %d to %s\n", model.c_str(),
                FLAGS_predict_batch, FLAGS_forward_graph.c_str());
    if (!FLAGS_weights_only) return 0;
  }
  require(FLAGS_weights_only,
          "give what to export: --weights-only (with --checkpoint and "
          "--output), --onnx=FILE (with --checkpoint) or --forward-graph=FILE (the training graph "
          "is exported by purine train "
          "--export-graph=FILE)");
  require(!FLAGS_output.empty(), "give the file to write: --output=FILE");
  const Shape image = test_image_shape(FLAGS_data);
  export_weights(predictor_options(model, {1, image[0], image[1], image[2]}), FLAGS_output);
  std::printf("wrote the weights of %s from %s to %s\n", model.c_str(), FLAGS_checkpoint.c_str(),
              FLAGS_output.c_str());
  return 0;
}

}  // namespace purine::cli
