// `purine devices` and the CUDA backend's loading (base/device_runtime.hpp): the backend is a
// library that a process loads only when something asks for a GPU, so CPU training never maps
// it, and a backend that is missing or broken is a line saying which file and why, not a crash.
// LD_DEBUG=files makes the dynamic loader name every library it loads, which shows which
// processes loaded the backend.

#include <catch2/catch.hpp>
#include <regex>
#include <string>

#include "fashion_mnist.hpp"
#include "purine_cli.hpp"
#include "temp_dir.hpp"

namespace {

using purine::testing::run_purine;

// The loader's own line ("file=<path>/libpurine_cuda.so [0];  ..."), not a message naming the
// file (a build without the backend says which file it lacks).
bool loaded_backend(const std::string& loader_log) {
  return std::regex_search(loader_log, std::regex("file=\\S*libpurine_cuda\\.so"));
}

}  // namespace

TEST_CASE("purine devices says what the GPU runtime sees, a GPU or none", "[cli]") {
  const auto r = run_purine("devices", "env LD_DEBUG=files");
  INFO(r.output);
  CHECK(r.status == 0);
  // With the CUDA backend: "CUDA 13.0 (driver ...), cuDNN ...: N GPUs" and a line per GPU;
  // without: a line saying why there is no GPU backend. Any line: an MPI library may warn on
  // stderr before it (Open MPI's PMIx did on the GPU machine).
  CHECK(std::regex_search(r.output,
                          std::regex("(^|\n)(CUDA [0-9.]+ .*: [0-9]+ GPUs?|no GPU backend: )")));
  CHECK(loaded_backend(r.output) == PURINE_BUILT_CUDA_BACKEND);
}

TEST_CASE("training on the CPU never loads the CUDA backend", "[cli]") {
  if (!purine::testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  const auto r = run_purine("train --model=mlp --max-iters=2 --batch=16 --noevaluate --threads=1",
                            "env LD_DEBUG=files");
  INFO(r.output.substr(0, 4000));
  CHECK(r.status == 0);
  CHECK(r.output.find("file=libglog") != std::string::npos);  // the loader did log
  CHECK_FALSE(loaded_backend(r.output));
}

TEST_CASE("a missing or broken CUDA backend is a line naming the file and why", "[cli]") {
  purine::testing::TempDir dir;
  const auto missing = run_purine("devices", "env PURINE_DEVICE_BACKEND=" + dir.file("none.so"));
  INFO(missing.output);
  CHECK(missing.status == 0);
  CHECK(missing.output.find("no GPU backend: this build has no CUDA backend (no " +
                            dir.file("none.so")) != std::string::npos);

  const std::string broken = dir.file("broken.so");
  REQUIRE(purine::testing::run_command("echo 'not a library' > " + broken).status == 0);
  const auto bad = run_purine("devices", "env PURINE_DEVICE_BACKEND=" + broken);
  INFO(bad.output);
  CHECK(bad.status == 0);
  CHECK(bad.output.find("no GPU backend: the CUDA backend " + broken + " could not be loaded (") !=
        std::string::npos);

  // A GPU location then fails before anything runs, saying the same.
  const auto train = run_purine("train --model=mlp --max-iters=1 --device=0",
                                "env PURINE_DEVICE_BACKEND=" + broken);
  INFO(train.output);
  CHECK(train.status != 0);
  CHECK(train.output.find(broken + " could not be loaded") != std::string::npos);
}
