// purine predict on one's own images: sizes checked naming the file, the model taken from the
// checkpoint, class names, sample images to try.
#include <catch2/catch.hpp>
#include <fstream>
#include <regex>
#include <string>

#include "fashion_mnist.hpp"
#include "purine_cli.hpp"
#include "temp_dir.hpp"
#include "tools/cli/image_file.hpp"

namespace {

using Result = purine::testing::CommandResult;

using purine::testing::run_purine;

bool exists(const std::string& path) { return std::ifstream(path).good(); }

}  // namespace

using Catch::Contains;

TEST_CASE("predict --write-samples, then --image with the checkpoint's model and class names",
          "[cli][predict]") {
  if (!purine::testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  purine::testing::TempDir dir;
  const std::string ckpt = dir.file("mlp.ckpt");
  REQUIRE(
      run_purine("train --model=mlp --max-iters=30 --noevaluate --threads=1 --checkpoint=" + ckpt)
          .status == 0);

  Result samples = run_purine("predict --write-samples=" + dir.file("s") + " --count=3");
  REQUIRE(samples.status == 0);
  const std::string first = dir.file("s") + "/0000-ankle-boot.png";  // PNG by default
  CHECK(samples.output == first + ": class 9 Ankle boot\n" + dir.file("s") +
                              "/0001-pullover.png: class 2 Pullover\n" + dir.file("s") +
                              "/0002-trouser.png: class 1 Trouser\n"
                              "wrote 3 test images of /usr/share/datasets/fashion-mnist; classify "
                              "one with: purine predict --checkpoint=FILE --image=" +
                              first + "\n");
  CHECK(exists(first));
  CHECK(!exists(dir.file("s") + "/0003-trouser.png"));

  // No --model: the checkpoint's, said so; Fashion-MNIST's class names.
  Result one = run_purine("predict --top=3 --threads=1 --image=" + first + " --checkpoint=" + ckpt);
  CHECK(one.status == 0);
  INFO(one.output);
  CHECK(std::regex_match(
      one.output,
      std::regex("model mlp \\(the checkpoint's\\), iteration 30 of .*mlp\\.ckpt\n.*0000-ankle-"
                 "boot\\.png: class \\d [A-Za-z /-]+ \\(0\\.\\d{3}\\)(, class \\d [A-Za-z /-]+ "
                 "\\(0\\.\\d{3}\\)){2}\n")));

  // The same sample as PGM: the same pixels, the same classes and probabilities.
  Result pgm_samples =
      run_purine("predict --write-samples=" + dir.file("p") + " --count=1 --sample-format=pgm");
  REQUIRE(pgm_samples.status == 0);
  const std::string first_pgm = dir.file("p") + "/0000-ankle-boot.pgm";
  CHECK(pgm_samples.output.rfind(first_pgm + ": class 9 Ankle boot\n", 0) == 0);
  CHECK(purine::testing::read_file(first_pgm).rfind("P5\n28 28\n255\n", 0) == 0);
  CHECK(purine::testing::read_file(first).rfind("\x89PNG\r\n\x1a\n", 0) == 0);
  CHECK(purine::cli::read_gray_image(first_pgm, first_pgm).pixels ==
        purine::cli::read_gray_image(first, first).pixels);
  Result one_pgm =
      run_purine("predict --top=3 --threads=1 --image=" + first_pgm + " --checkpoint=" + ckpt);
  CHECK(one_pgm.status == 0);
  CHECK(std::regex_replace(one_pgm.output, std::regex("0000-ankle-boot\\.pgm"),
                           "0000-ankle-boot.png") ==
        std::regex_replace(one.output, std::regex("/s/0000"), "/p/0000"));
  Result bad_format =
      run_purine("predict --write-samples=" + dir.file("s") + " --sample-format=jpg");
  CHECK(bad_format.status == 1);
  CHECK(bad_format.output == "error: --sample-format=jpg: give png or pgm\n");

  // A wrong-size image is named with both sizes, before any tensor of the checkpoint, PNG or PGM.
  purine::cli::GrayImage wide{32, 30, std::vector<uint8_t>(32 * 30, 0x10)};
  purine::cli::write_gray_image(dir.file("wide.png"), wide, purine::cli::ImageFormat::kPng);
  Result big = run_purine("predict --image=" + dir.file("wide.png") + " --checkpoint=" + ckpt);
  CHECK(big.status == 1);
  CHECK(big.output == "error: --image=" + dir.file("wide.png") +
                          " is 32x30; model 'mlp' takes 28x28 grayscale images (the "
                          "checkpoint's)\n");
  std::ofstream(dir.file("big.pgm"), std::ios::binary) << "P5\n56 40\n255\n"
                                                       << std::string(56 * 40, '\x10');
  Result big_pgm = run_purine("predict --image=" + dir.file("big.pgm") + " --checkpoint=" + ckpt);
  CHECK(big_pgm.status == 1);
  CHECK(big_pgm.output == "error: --image=" + dir.file("big.pgm") +
                              " is 56x40; model 'mlp' takes 28x28 grayscale images (the "
                              "checkpoint's)\n");

  // A damaged or foreign file: one line naming it and what is wrong, exit status 1, no crash.
  const std::string png = purine::testing::read_file(first);
  std::ofstream(dir.file("cut.png"), std::ios::binary) << png.substr(0, png.size() / 2);
  Result cut = run_purine("predict --image=" + dir.file("cut.png") + " --checkpoint=" + ckpt);
  CHECK(cut.status == 1);
  CHECK(cut.output == "error: --image=" + dir.file("cut.png") +
                          ": truncated PNG: the file ends before the PNG does\n");
  Result foreign = run_purine("predict --image=" + ckpt + " --checkpoint=" + ckpt);
  CHECK(foreign.status == 1);
  CHECK(foreign.output == "error: --image=" + ckpt +
                              ": not a PNG or binary PGM image (its first bytes are neither "
                              "PNG's signature nor \"P5\")\n");

  // --labels: its names, or an error naming the file and both counts.
  {
    std::ofstream labels(dir.file("labels.txt"));
    for (int c = 0; c < 10; ++c) labels << "name " << c << "\n";
    std::ofstream(dir.file("short.txt")) << "a\nb\n";
  }
  Result named = run_purine("predict --top=1 --threads=1 --image=" + first +
                            " --checkpoint=" + ckpt + " --labels=" + dir.file("labels.txt"));
  CHECK(named.status == 0);
  CHECK(std::regex_search(named.output, std::regex(": class (\\d) name \\1 \\(0\\.\\d{3}\\)\n")));
  Result short_labels = run_purine("predict --image=" + first + " --checkpoint=" + ckpt +
                                   " --labels=" + dir.file("short.txt"));
  CHECK(short_labels.status == 1);
  CHECK(short_labels.output == "error: --labels=" + dir.file("short.txt") +
                                   " has 2 names, one per line; the model has 10 classes "
                                   "(--classes)\n");
  Result no_count = run_purine("predict --write-samples=" + dir.file("s") + " --count=0");
  CHECK(no_count.status == 1);
  CHECK(no_count.output == "error: --count must be at least 1, got 0\n");
}
