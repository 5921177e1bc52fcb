// purine predict on one's own images: sizes checked naming the file, the model taken from the
// checkpoint, class names, sample images to try.
#include <catch2/catch.hpp>
#include <fstream>
#include <regex>
#include <string>

#include "fashion_mnist.hpp"
#include "purine_cli.hpp"
#include "temp_dir.hpp"

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
  const std::string first = dir.file("s") + "/0000-ankle-boot.pgm";
  CHECK(samples.output == first + ": class 9 Ankle boot\n" + dir.file("s") +
                              "/0001-pullover.pgm: class 2 Pullover\n" + dir.file("s") +
                              "/0002-trouser.pgm: class 1 Trouser\n"
                              "wrote 3 test images of /usr/share/datasets/fashion-mnist; classify "
                              "one with: purine predict --checkpoint=FILE --image=" +
                              first + "\n");
  CHECK(exists(first));
  CHECK(!exists(dir.file("s") + "/0003-trouser.pgm"));

  // No --model: the checkpoint's, said so; Fashion-MNIST's class names.
  Result one = run_purine("predict --top=3 --threads=1 --image=" + first + " --checkpoint=" + ckpt);
  CHECK(one.status == 0);
  INFO(one.output);
  CHECK(std::regex_match(
      one.output,
      std::regex("model mlp \\(the checkpoint's\\), iteration 30 of .*mlp\\.ckpt\n.*0000-ankle-"
                 "boot\\.pgm: class \\d [A-Za-z /-]+ \\(0\\.\\d{3}\\)(, class \\d [A-Za-z /-]+ "
                 "\\(0\\.\\d{3}\\)){2}\n")));

  // A wrong-size image is named with both sizes, before any tensor of the checkpoint.
  std::ofstream(dir.file("big.pgm"), std::ios::binary) << "P5\n56 40\n255\n"
                                                       << std::string(56 * 40, '\x10');
  Result big = run_purine("predict --image=" + dir.file("big.pgm") + " --checkpoint=" + ckpt);
  CHECK(big.status == 1);
  CHECK(big.output == "error: " + dir.file("big.pgm") +
                          " is 56x40; model 'mlp' takes 28x28 images (the checkpoint's)\n");

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
