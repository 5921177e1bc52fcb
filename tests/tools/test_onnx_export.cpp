// purine export --onnx (train/onnx_export.hpp): the ONNX model of a trained mlp, convnet_bn and
// resnet20 (residual sums) passes onnx's checker and shape inference (tools/onnx_check.py, under a
// python3 with onnx), and computes what purine predict computes; a failed export leaves no file.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fashion_mnist.hpp"
#include "purine_cli.hpp"
#include "temp_dir.hpp"
#include "train/onnx_export.hpp"
#include "train/predictor.hpp"

namespace {

using purine::testing::run_command;
using purine::testing::run_purine;

bool exists(const std::string& path) { return std::ifstream(path).good(); }

// The source tree: this file is its tests/tools/test_onnx_export.cpp (CMake compiles by full
// path), or, run by hand from the source tree, ".".
std::string source_dir() {
  const std::string file = __FILE__;
  const std::string tail = "tests/tools/test_onnx_export.cpp";
  if (file.size() > tail.size() && file.compare(file.size() - tail.size(), tail.size(), tail) == 0)
    return file.substr(0, file.size() - tail.size());
  return ".";
}

// A python3 that imports onnx (Debian's python3-onnx is under /usr/bin/python3, which another
// python3 first on PATH may hide); empty when there is none.
std::string python_with_onnx() {
  for (const char* python : {"/usr/bin/python3", "python3"})
    if (run_command(std::string(python) + " -c 'import onnx, numpy' 2>/dev/null").status == 0)
      return python;
  return "";
}

// Why the ONNX tests cannot run here, or empty.
std::string skip_reason(const std::string& python) {
  if (!purine::onnx_export_supported())
    return "this build has no ONNX export (libonnx-dev was not found; run tools/setup.sh)";
  if (python.empty()) return "no python3 imports onnx and numpy (install python3-onnx)";
  if (!purine::testing::have_fashion_mnist())
    return "Fashion-MNIST not installed (run tools/setup.sh)";
  return "";
}

// The rows "row i: v0 v1 ..." that tools/onnx_check.py prints.
std::vector<std::vector<double>> rows_of(const std::string& output) {
  std::vector<std::vector<double>> rows;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("row ", 0) != 0) continue;
    std::istringstream values(line.substr(line.find(':') + 1));
    rows.emplace_back();
    for (double v; values >> v;) rows.back().push_back(v);
  }
  return rows;
}

}  // namespace

using Catch::Contains;

TEST_CASE(
    "export --onnx of mlp, convnet_bn and resnet20: checked by onnx, equal to predict's "
    "probabilities",
    "[cli][onnx]") {
  const std::string python = python_with_onnx();
  const std::string skip = skip_reason(python);
  if (!skip.empty()) {
    WARN("skipped: " + skip);
    return;
  }
  purine::testing::TempDir dir;
  const std::string check = python + " " + source_dir() + "/tools/onnx_check.py ";

  // Three test images, standardized as in training (predict's defaults), as float32.
  const int n = 3;
  const std::vector<purine::TestImage> images =
      purine::read_test_images(purine::testing::kFashionMnistDir, n);
  std::vector<float> pixels;
  for (const purine::TestImage& image : images)
    for (unsigned char p : image.pixels)
      pixels.push_back(static_cast<float>((p / 255.0 - 0.2860) / 0.3530));
  purine::Tensor batch(purine::Shape{n, 1, 28, 28});
  batch.set_values(pixels);
  std::ofstream(dir.file("images.f32"), std::ios::binary)
      .write(reinterpret_cast<const char*>(pixels.data()),
             static_cast<std::streamsize>(pixels.size() * sizeof(float)));

  for (const std::string model : {"mlp", "convnet_bn", "resnet20"}) {
    SECTION(model) {
      const std::string ckpt = dir.file(model + ".ckpt"), onnx = dir.file(model + ".onnx");
      REQUIRE(run_purine("train --model=" + model +
                         " --max-iters=20 --noevaluate --threads=2 --checkpoint=" + ckpt)
                  .status == 0);
      const purine::testing::CommandResult exported =
          run_purine("export --checkpoint=" + ckpt + " --onnx=" + onnx);
      INFO(exported.output);
      REQUIRE(exported.status == 0);
      CHECK(exported.output == "wrote the ONNX model of " + model + " with the weights of " + ckpt +
                                   " to " + onnx + "\n");

      // (1) onnx's full check and strict shape inference; the output's shape.
      const purine::testing::CommandResult checked = run_command(check + onnx);
      INFO(checked.output);
      CHECK(checked.status == 0);
      CHECK(checked.output == "output probabilities [batch, 10]\n");

      // (2) The model's probabilities on three test images, by ONNX Runtime where python3 has
      // it, else by onnx_check.py's NumPy evaluator, against the Predictor's (predict's).
      const purine::testing::CommandResult evaluated =
          run_command(check + onnx + " --batch=3 --input=" + dir.file("images.f32"));
      INFO(evaluated.output);
      REQUIRE(evaluated.status == 0);
      const std::vector<std::vector<double>> rows = rows_of(evaluated.output);
      purine::Predictor predictor({model, ckpt, {n, 1, 28, 28}});
      const std::vector<float> expected = predictor.probabilities(batch).values();
      REQUIRE(rows.size() == static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) {
        REQUIRE(rows[i].size() == 10);
        for (int c = 0; c < 10; ++c) CHECK(std::abs(rows[i][c] - expected[i * 10 + c]) < 1e-4);
      }
    }
  }
}

TEST_CASE("export --onnx that fails leaves no file and says why", "[cli][onnx]") {
  if (!purine::testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  purine::testing::TempDir dir;
  const std::string ckpt = dir.file("mlp.ckpt"), onnx = dir.file("out.onnx");
  REQUIRE(
      run_purine("train --model=mlp --max-iters=2 --noevaluate --threads=1 --checkpoint=" + ckpt)
          .status == 0);
  // The weights of mlp for convnet: refused, nothing written.
  const purine::testing::CommandResult wrong =
      run_purine("export --model=convnet --checkpoint=" + ckpt + " --onnx=" + onnx);
  CHECK(wrong.status == 1);
  CHECK_THAT(wrong.output, Catch::StartsWith("error: "));
  if (!purine::onnx_export_supported()) CHECK_THAT(wrong.output, Contains("libonnx-dev"));
  CHECK(!exists(onnx));
  const purine::testing::CommandResult no_checkpoint = run_purine("export --onnx=" + onnx);
  CHECK(no_checkpoint.status == 1);
  CHECK(!exists(onnx));
}
