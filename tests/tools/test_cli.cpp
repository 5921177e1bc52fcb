// The purine tool: bad input gives one clear line and a non-zero exit.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "fashion_mnist.hpp"
#include "purine_cli.hpp"
#include "spawned_process.hpp"
#include "temp_dir.hpp"
#include "train/checkpoint_dir.hpp"
#include "train/options.hpp"

namespace {

using Result = purine::testing::CommandResult;

// The purine tool with `args`, started through `launcher` (e.g. "taskset -c 0") if given.
using purine::testing::purine_binary;
using purine::testing::read_file;
using purine::testing::run_purine;

// The summary's final_loss as written (9 significant digits: equal strings, equal floats).
std::string final_loss(const std::string& summary_path) {
  const std::string json = read_file(summary_path);
  std::smatch m;
  INFO(summary_path << ":\n" << json);
  REQUIRE(std::regex_search(json, m, std::regex("\"final_loss\": ([0-9.eE+-]+)")));
  return m[1].str();
}

size_t lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

using purine::testing::TempDir;

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

using Catch::Contains;

// Started without a launcher the tool leaves MPI uninitialized (tools/cli/main.cpp): an
// allreduce over MPI is then the sum over a world of one (it used to need MPI's own start).
TEST_CASE("purine alone runs data parallelism over MPI as a world of one", "[cli]") {
  Result r = run_purine(
      "train --model=mlp --data=synthetic:1x28x28:10 --parallel=data --reduce=mpi --max-iters=3 "
      "--noevaluate");
  INFO(r.output);
  REQUIRE(r.status == 0);
  REQUIRE_THAT(r.output, Contains("(3 iterations"));
}

TEST_CASE("missing data directory", "[cli]") {
  Result r = run_purine("train --data=/nonexistent/dir --max-iters=1");
  REQUIRE(r.status != 0);
  REQUIRE(lines(r.output) == 1);
  REQUIRE_THAT(r.output, Contains("error:") && Contains("/nonexistent/dir"));
}

TEST_CASE("non-IDX and truncated data files", "[cli]") {
  TempDir temp;
  const std::string& dir = temp.path();
  for (const char* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                           "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"})
    write_file(dir + "/" + name, "this is not an IDX file at all");
  Result r = run_purine("train --data=" + dir + " --max-iters=1");
  REQUIRE(r.status != 0);
  REQUIRE(lines(r.output) == 1);
  REQUIRE_THAT(r.output, Contains("error:") && Contains(dir));

  // A valid header promising 100 images of 28x28 but carrying only a few bytes.
  std::string header("\x00\x00\x08\x03\x00\x00\x00\x64\x00\x00\x00\x1c\x00\x00\x00\x1c", 16);
  write_file(dir + "/train-images-idx3-ubyte", header + "abc");
  write_file(dir + "/train-labels-idx1-ubyte",
             std::string("\x00\x00\x08\x01\x00\x00\x00\x64", 8) + std::string(100, '\x01'));
  r = run_purine("train --data=" + dir + " --max-iters=1");
  REQUIRE(r.status != 0);
  REQUIRE(lines(r.output) == 1);
  REQUIRE_THAT(r.output, Contains("error:") && Contains("train-images-idx3-ubyte"));
}

TEST_CASE("unknown model lists the known ones", "[cli]") {
  Result r = run_purine("train --model=alexnet9 --max-iters=1");
  REQUIRE(r.status != 0);
  REQUIRE(lines(r.output) == 1);
  REQUIRE_THAT(r.output, Contains("unknown model 'alexnet9'") && Contains("convnet") &&
                             Contains("lenet") && Contains("mlp"));
}

TEST_CASE("bad flag values", "[cli]") {
  for (const char* args :
       {"train --batch=0", "train --threads=-1", "train --lr=-1", "train --executor=magic",
        "train --batch=abc", "train --no-such-flag=1", "train --lr-policy=cosine2 --max-iters=1",
        "train --bucket-kb=-1", "train --locations=2", "train --parallel=data --locations=0",
        "train --parallel=data --locations=3 --batch=64",
        "train --parallel=data --locations=2 --reduce=mpi"}) {
    INFO(args);
    Result r = run_purine(args);
    REQUIRE(r.status != 0);
    REQUIRE(lines(r.output) == 1);
    REQUIRE_THAT(r.output, Contains("ERROR") || Contains("error:"));
  }
}

TEST_CASE("option errors are the trainer's messages, shown as they are", "[cli]") {
  // train/options.hpp words them with the flags; the CLI adds only "error: ".
  struct Case {
    const char* args;
    const char* line;
  };
  for (const Case& c : {
           Case{"train --lr=inf", "error: --lr must be positive and finite, got inf\n"},
           Case{"train --stall-timeout=0", "error: --stall-timeout must be positive, got 0\n"},
           Case{"train --reduce=tree",
                "error: unknown reduction 'tree' for --reduce; choose ring, ps, mpi or nccl\n"},
           Case{"train --lr-policy=exp",
                "error: unknown learning-rate policy 'exp' for --lr-policy; choose fixed, "
                "step, multistep, poly or cosine\n"},
           Case{"train --lr-milestones=0.5,x",
                "error: --lr-milestones takes comma-separated numbers; 'x' is not one (in "
                "'0.5,x')\n"},
           Case{"train --locations=2",
                "error: --locations=2 needs --parallel=data, model or hybrid\n"},
           Case{"train --parallel=model",
                "error: --parallel=model needs the layers to split: give --split=LAYERS\n"},
           Case{"train --split=fc1", "error: --split needs --parallel=model or hybrid\n"},
           Case{"train --parallel=model --split=fc1,fc2",
                "error: --parallel=model splits layers over locations: give --locations=N (N >= "
                "2), --devices, or several ranks\n"},
           Case{"train --parallel=model --split=fc1,,fc2",
                "error: --split=fc1,,fc2: an empty name; separate names by commas\n"},
       }) {
    INFO(c.args);
    Result r = run_purine(c.args);
    CHECK(r.status != 0);
    CHECK(r.output == c.line);
  }
}

TEST_CASE("purine graph refuses an unknown format and an output in a missing folder",
          "[cli][graph]") {
  Result bad = run_purine("graph --model=mlp --format=gif");
  CHECK(bad.status != 0);
  CHECK(bad.output == "error: --format must be dot, svg or png, got 'gif'\n");
  for (const char* format : {"dot", "png"}) {
    Result missing = run_purine(std::string("graph --model=mlp --format=") + format +
                                " --output=/no-such-folder/g." + format);
    CHECK(missing.status != 0);
    CHECK(missing.output == std::string("error: --output=/no-such-folder/g.") + format +
                                ": the folder /no-such-folder does not exist\n");
  }
}

TEST_CASE("purine graph draws a layout's training graph as GraphViz text and SVG", "[cli][graph]") {
  if (!purine::testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  purine::testing::TempDir dir;
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  Result r = run_purine(
      "graph --model=mlp --parallel=pipeline --stages=3 --expand --format=dot "
      "--output=" +
      dir.file("mlp.dot"));
  REQUIRE(r.status == 0);
  const std::string dot = read(dir.file("mlp.dot"));
  CHECK_THAT(dot, Contains("label=\"rank0:cpu2\"") && Contains("shape=circle") &&
                      Contains("style=dashed, color=") && !Contains("label=\"swap\""));
  // GoogLeNet's pictures: tests/purine/test_graph_dot.cpp, built in one process.
  if (std::system("command -v dot > /dev/null") != 0) {
    WARN("Graphviz's dot is not installed (tools/setup.sh installs it): SVG not checked");
    return;
  }
  REQUIRE(run_purine("graph --model=mlp --output=" + dir.file("mlp.svg")).status == 0);
  CHECK_THAT(read(dir.file("mlp.svg")), Contains("<svg"));
}

// A small graph to draw: quick to build, no data set needed.
const char kSmallGraph[] = " --model=mlp --data=synthetic:1x8x8:4 --batch=8";

TEST_CASE("purine graph --ranks draws every rank in one process, at the size and dpi asked",
          "[cli][graph]") {
  purine::testing::TempDir dir;
  Result r = run_purine(std::string("graph --ranks=2 --size=16x10 --dpi=150 --format=dot") +
                        kSmallGraph + " --output=" + dir.file("mlp2.dot"));
  REQUIRE(r.status == 0);
  const std::string dot = read_file(dir.file("mlp2.dot"));
  // Both ranks (data parallel, as --parallel=none becomes with several ranks), the fused bucket
  // of gradients between them named by the layers it carries.
  CHECK_THAT(dot, Contains("label=\"rank0:cpu\"") && Contains("label=\"rank1:cpu\"") &&
                      Contains("\"replica1::mlp::fc1|forward|rank1:cpu\"") &&
                      Contains("label=\"bucket\\nfc1, fc2, fc3\""));
  CHECK_THAT(dot, Contains("size=\"16,10\";") && Contains("dpi=150;"));
}

TEST_CASE("purine graph refuses a size or dpi it cannot use, in the words of the flags",
          "[cli][graph]") {
  for (const auto& [args, line] : std::vector<std::pair<std::string, std::string>>{
           {"--size=16",
            "error: --size=16: give the width and height in inches as WxH, e.g. 16x10\n"},
           {"--dpi=0", "error: --dpi=0: give dots per inch from 1 to 1200 (96 is a screen's)\n"},
       }) {
    INFO(args);
    Result bad = run_purine("graph " + args + kSmallGraph + " --format=dot --output=/tmp/x.dot");
    CHECK(bad.status == 1);
    CHECK(bad.output == line);
  }
}

TEST_CASE("purine graph draws a PNG at the dpi asked, and dot's failure names the path",
          "[cli][graph]") {
  if (std::system("command -v dot > /dev/null") != 0) {
    WARN("Graphviz's dot is not installed (tools/setup.sh installs it): skipped");
    return;
  }
  purine::testing::TempDir dir;
  // A folder where the file should be: dot cannot write it.
  Result unwritable =
      run_purine(std::string("graph --format=png") + kSmallGraph + " --output=" + dir.path());
  CHECK(unwritable.status == 1);
  CHECK_THAT(unwritable.output, Contains("error: Graphviz's dot could not write " + dir.path() +
                                         " (exit status 1; its message is above)"));
  REQUIRE(run_purine(std::string("graph --format=png --dpi=48") + kSmallGraph +
                     " --output=" + dir.file("mlp.png"))
              .status == 0);
  // The PNG's width and height, big-endian at bytes 16..23: at 96 dpi about twice as large.
  const std::string png = read_file(dir.file("mlp.png"));
  REQUIRE(png.size() > 24);
  auto word = [&](size_t at) {
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) v = v << 8 | static_cast<unsigned char>(png[at + k]);
    return v;
  };
  CHECK(png.compare(1, 3, "PNG") == 0);
  CHECK(word(16) > 200);
  CHECK(word(16) < 1000);
  CHECK(word(20) < 600);
}

TEST_CASE("purine ops lists every operator with its signature", "[cli]") {
  Result r = run_purine("ops");
  REQUIRE(r.status == 0);
  CHECK(lines(r.output) >= 45);
  CHECK_THAT(r.output, Contains("\nconv: (x [N, C, H, W], w [O, C, kh, kw]) -> y [N, O, Ho, Wo]; "
                                "attrs: stride") &&
                           Contains("\nadam_update: (weight, grad, m, v, ..., lr {}, step {})"));
}

TEST_CASE("unknown command prints usage", "[cli]") {
  Result r = run_purine("fly");
  REQUIRE(r.status != 0);
  REQUIRE_THAT(r.output, Contains("unknown command 'fly'") && Contains("usage"));
}

TEST_CASE("train --help lists Purine's flags only, --helpfull lists every flag", "[cli]") {
  Result r = run_purine("train --help");
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("usage: purine train") && Contains("--max-iters (int64") &&
                           Contains("--parallel (string, default none)") &&
                           Contains("--stages (int32, default 1)") && Contains("--helpfull"));
  CHECK_THAT(r.output, !Contains("logtostderr") && !Contains("flagfile"));  // glog's, gflags'
  CHECK_THAT(r.output, !Contains("--image") && !Contains("--expand"));      // predict's, graph's
  // graph: its own flags and those that shape the graph, not those that run or save a training.
  CHECK_THAT(run_purine("graph --help").output,
             Contains("--expand") && Contains("--split") && Contains("--micro-batches") &&
                 !Contains("--checkpoint") && !Contains("--max-iters (") && !Contains("--lr "));
  CHECK_THAT(run_purine("predict --help").output, Contains("--image") && !Contains("--lr "));
  CHECK(lines(r.output) < 140);  // --helpfull adds glog's and gflags' flags: over 300 lines
  Result full = run_purine("train --helpfull");
  CHECK_THAT(full.output, Contains("logtostderr") && Contains("max_iters"));
}

TEST_CASE(
    "train with a pipeline layout runs in one process and refuses a layout the model cannot fill",
    "[cli][pipeline]") {
  if (!purine::testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  TempDir temp;
  Result r = run_purine(
      "train --model=mlp --parallel=pipeline --stages=3 --micro-batches=4 --schedule=gpipe "
      "--max-iters=5 --noevaluate --threads=1 --summary=" +
      temp.file("summary.json"));
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("batch 64 through a pipeline of 3 stages over 1 rank"));
  // The cut, with each stage's share of the estimated work (fc1 has most of the weights).
  CHECK_THAT(r.output, Contains("stages by estimated work: 0: fc1..relu1 (8") &&
                           Contains("%), 1: fc2..relu2 (") && Contains("%), 2: fc3 ("));
  // The measured bubble next to the theory, each stage's share, and GPipe's 4 micro-batches in
  // flight at the first stage.
  CHECK_THAT(r.output, Contains("pipeline of 3 stages, 4 micro-batches (gpipe): bubble 0.") &&
                           Contains("(0.333 in theory for equal stages); stages busy 0.") &&
                           Contains(" of the time; at most 4 micro-batches in flight"));
  CHECK_THAT(
      read_file(temp.file("summary.json")),
      Contains("\"micro_batches\": 4,\n  \"schedule\": \"gpipe\",\n  \"pipeline_bubble\": 0."));
  Result bad = run_purine("train --model=mlp --parallel=pipeline --stages=5 --max-iters=1");
  CHECK(bad.status != 0);
  CHECK(lines(bad.output) == 1);
  CHECK_THAT(bad.output,
             Contains("error: pipeline of model 'mlp': 5 stages") && Contains("use at most 3"));
  // Cut by the times of a traced run instead of the estimates; a trace of another model or no
  // trace at all is refused, naming it.
  Result traced = run_purine("train --model=mlp --max-iters=3 --noevaluate --threads=1 --trace=" +
                             temp.file("mlp.json"));
  REQUIRE(traced.status == 0);
  Result by_trace = run_purine(
      "train --model=mlp --parallel=pipeline --stages=2 --max-iters=1 --noevaluate --threads=1 "
      "--stage-trace=" +
      temp.file("mlp.json"));
  CHECK(by_trace.status == 0);
  CHECK_THAT(by_trace.output, Contains("stages by traced time: 0: fc1.."));
  Result other =
      run_purine("train --model=lenet --parallel=pipeline --stages=2 --max-iters=1 --stage-trace=" +
                 temp.file("mlp.json"));
  CHECK(other.status != 0);
  CHECK_THAT(other.output, Contains("times no op of model 'lenet'"));
  Result missing =
      run_purine("train --model=mlp --parallel=pipeline --stages=2 --max-iters=1 --stage-trace=" +
                 temp.file("none.json"));
  CHECK(missing.status != 0);
  CHECK_THAT(missing.output, Contains("--stage-trace '" + temp.file("none.json") + "'"));
}

TEST_CASE("train with split layers runs in one process and refuses a layer the model lacks",
          "[cli][model_parallel]") {
  if (!purine::testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  Result r = run_purine(
      "train --model=mlp --parallel=model --split=fc1,fc2 --locations=2 --max-iters=5 "
      "--noevaluate --threads=1");
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("batch 64 with fc1,fc2 split over 2 locations of 1 rank"));
  Result bad =
      run_purine("train --model=mlp --parallel=model --split=fc4 --locations=2 --max-iters=1");
  CHECK(bad.status != 0);
  CHECK(lines(bad.output) == 1);
  CHECK_THAT(bad.output, Contains("error: --split: model 'mlp' has no layer with parameters "
                                  "named 'fc4'; it has mlp::fc1, mlp::fc2, mlp::fc3"));
}

TEST_CASE("predict and export use a trained checkpoint, bad input is one error line",
          "[cli][predictor]") {
  for (const char* args :
       {"predict --model=mlp", "export --model=mlp --checkpoint=x.ckpt --output=w",
        "export --model=mlp --checkpoint=x.ckpt --weights-only",
        "predict --model=mlp --checkpoint=/nonexistent.ckpt --image=/nonexistent.pgm"}) {
    INFO(args);
    Result r = run_purine(args);
    CHECK(r.status != 0);
    CHECK(lines(r.output) == 1);
    CHECK_THAT(r.output, Contains("error: "));
  }
  // The model a checkpoint records is read from its first bytes, not from the whole file.
  CHECK(run_purine("predict --checkpoint=/dev/zero").output ==
        "error: checkpoint '/dev/zero' is not a Purine checkpoint (no PURINECK header)\n");
  if (!purine::testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  purine::testing::TempDir dir;
  const std::string ckpt = dir.file("mlp.ckpt");
  REQUIRE(
      run_purine("train --model=mlp --max-iters=30 --noevaluate --threads=1 --checkpoint=" + ckpt)
          .status == 0);
  Result eval = run_purine("predict --model=mlp --test-samples=500 --checkpoint=" + ckpt);
  CHECK(eval.status == 0);
  CHECK_THAT(eval.output, Contains("mlp on 500 test images of") && Contains("accuracy 0.") &&
                              Contains("confusion matrix (rows: true class"));
  // Without --model export takes the checkpoint's; another --model is refused by name.
  Result exported = run_purine("export --weights-only --checkpoint=" + ckpt +
                               " --output=" + dir.file("mlp.weights"));
  CHECK(exported.status == 0);
  CHECK_THAT(exported.output, Contains("wrote the weights of mlp from"));
  Result other = run_purine("predict --model=convnet_bn --checkpoint=" + ckpt);
  CHECK(other.status != 0);
  CHECK_THAT(other.output, Contains("error: checkpoint '" + ckpt +
                                    "' is of model 'mlp', not --model=convnet_bn (leave --model "
                                    "out to use the checkpoint's)"));
  // A 28x28 PGM, and one that is not a PGM.
  {
    std::ofstream pgm(dir.file("x.pgm"), std::ios::binary);
    pgm << "P5\n# a comment\n28 28\n255\n" << std::string(28 * 28, '\x40');
    std::ofstream bad(dir.file("bad.pgm"));
    bad << "P2 28 28 255";
  }
  Result one = run_purine("predict --model=mlp --top=3 --image=" + dir.file("x.pgm") +
                          " --checkpoint=" + dir.file("mlp.weights"));
  CHECK(one.status == 0);
  CHECK(std::regex_search(
      one.output,
      std::regex(
          R"(x\.pgm: class \d [A-Za-z /-]+ \(0\.\d{3}\)(, class \d [A-Za-z /-]+ \(0\.\d{3}\)){2}\n)")));
  Result bad =
      run_purine("predict --model=mlp --image=" + dir.file("bad.pgm") + " --checkpoint=" + ckpt);
  CHECK(bad.status != 0);
  CHECK_THAT(bad.output, Contains(dir.file("bad.pgm") + ": a plain (text) PGM, P2; purine reads "
                                                        "binary PGM (P5) and PNG"));
}

TEST_CASE("train --test-every evaluates during training, --metrics writes a JSON line each",
          "[cli][metrics]") {
  CHECK_THAT(run_purine("train --test-every=-2").output,
             Contains("error: --test-every must be N >= 0 iterations (0: when training ends) or "
                      "-1 (every epoch), got -2"));
  if (!purine::testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  purine::testing::TempDir dir;
  const std::string common =
      "train --model=mlp --batch=16 --threads=1 --test-samples=200 --lr-policy=fixed "
      "--checkpoint=" +
      dir.file("ckpt") + " --metrics=" + dir.file("m.jsonl") + " ";
  Result r = run_purine(common + "--max-iters=25 --test-every=10");
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("iter 10  epoch 1  test accuracy 0.") &&
                           Contains("iter 20  epoch 1  test accuracy 0."));
  std::vector<std::string> metrics;
  {
    std::ifstream in(dir.file("m.jsonl"));
    for (std::string line; std::getline(in, line);) metrics.push_back(line);
  }
  REQUIRE(metrics.size() == 25 + 3);  // the iterations, two evaluations and the one at the end
  CHECK(std::regex_match(metrics[0], std::regex(R"(\{"iteration": 1, "epoch": 1, "loss": [0-9.]+, )"
                                                R"("lr": 0.01, "images_per_sec": [0-9.e+]+\})")));
  CHECK(std::regex_match(
      metrics[10], std::regex(R"(\{"iteration": 10, "epoch": 1, "test_accuracy": 0\.\d+\})")));
  CHECK_THAT(metrics.back(), Contains("{\"iteration\": 25, \"epoch\": 1, \"test_accuracy\": "));
  // A resumed run appends; a full disk is a warning, and the run trains on.
  REQUIRE(run_purine(common + "--max-iters=30 --test-every=0 --resume").status == 0);
  CHECK(lines(read_file(dir.file("m.jsonl"))) == 28 + 5 + 1);
  Result full = run_purine(
      "train --model=mlp --batch=16 --threads=1 --max-iters=3 --noevaluate "
      "--metrics=/dev/full");
  CHECK(full.status == 0);
  CHECK_THAT(full.output, Contains("warning: cannot write the metrics file '/dev/full'") &&
                              Contains("(3 iterations"));
}

TEST_CASE("train --config reads a TrainConfig, flags override it, --print-config shows the result",
          "[cli][config]") {
  purine::testing::TempDir dir;
  {
    std::ofstream(dir.file("c.pbtxt")) << "model: \"mlp\"\n# a comment\nmax_iters: 3\n"
                                       << "lr: 0.02\nparallel: \"pipeline\"\nstages: 3\n";
    std::ofstream(dir.file("unknown.pbtxt")) << "model: \"mlp\"\nlrr: 3\n";
    std::ofstream(dir.file("typo.pbtxt")) << "batch: \"many\"\n";
  }
  Result printed = run_purine("train --config=" + dir.file("c.pbtxt") + " --lr=0.5 --print-config");
  REQUIRE(printed.status == 0);
  CHECK_THAT(printed.output, Contains("model: \"mlp\"\n") && Contains("max_iters: 3\n") &&
                                 Contains("lr: 0.5\n") && Contains("parallel: \"pipeline\"\n") &&
                                 Contains("stages: 3\n") && Contains("optimizer: \"sgd\"\n"));
  // Every field of TrainConfig, each from its flag, after four lines naming the two flags that
  // are no fields (tests/tools/test_config.cpp checks each flag).
  CHECK(lines(printed.output) == 4 + 65);
  Result unknown = run_purine("train --config=" + dir.file("unknown.pbtxt"));
  CHECK(unknown.status != 0);
  CHECK(unknown.output == "error: --config=" + dir.file("unknown.pbtxt") +
                              ":2:4: TrainConfig has no field 'lrr'; did you mean 'lr'? (fields "
                              "are the purine train flags, written max_iters for --max-iters)\n");
  Result typo = run_purine("train --config=" + dir.file("typo.pbtxt"));
  CHECK(typo.status != 0);
  CHECK_THAT(typo.output, Contains("typo.pbtxt:1:8: field 'batch': Expected integer"));
  Result missing = run_purine("train --config=" + dir.file("none.pbtxt"));
  CHECK_THAT(missing.output, Contains("none.pbtxt: cannot open it"));
  if (!purine::testing::have_fashion_mnist()) return;
  Result trained =
      run_purine("train --config=" + dir.file("c.pbtxt") + " --noevaluate --threads=1");
  CHECK(trained.status == 0);
  CHECK_THAT(trained.output, Contains("training mlp: batch 64 through a pipeline of 3 stages") &&
                                 Contains("(3 iterations"));
}

TEST_CASE("more threads than the cores the process may use gives a warning", "[cli]") {
  // Bound to one core, as mpirun binds its ranks; the missing data then ends the run early.
  Result r = run_purine("train --threads=2 --data=/nonexistent/dir", "taskset -c 0");
  REQUIRE(r.status != 0);
  // Regression: lenet ran at a tenth of its speed so, without a word.
  REQUIRE_THAT(r.output, Contains("warning: this process may run on 1 core (its CPU affinity) but "
                                  "--threads=2; the threads will take turns, many times slower: "
                                  "give --threads=1 or run it on more cores\n"));
  r = run_purine("train --threads=1 --data=/nonexistent/dir", "taskset -c 0");
  REQUIRE_THAT(r.output, !Contains("warning"));
}

TEST_CASE("without --threads, training takes a thread per core it may run on", "[cli]") {
  const std::string run =
      "train --model=mlp --data=synthetic:1x28x28:10 --max-iters=1 --noevaluate";
  Result bound = run_purine(run, "taskset -c 0");
  INFO(bound.output);
  REQUIRE(bound.status == 0);
  CHECK_THAT(bound.output, Contains("training mlp: batch 64 x 1 rank, 1 thread, "));
  CHECK_THAT(bound.output, !Contains("warning"));
  const int all = purine::automatic_threads();
  Result free = run_purine(run);
  INFO(free.output);
  REQUIRE(free.status == 0);
  CHECK_THAT(free.output, Contains("x 1 rank, " + std::to_string(all) + " thread" +
                                   (all == 1 ? "" : "s") + ", "));
  Result negative = run_purine(run + " --threads=-1");
  CHECK(negative.status != 0);
  CHECK_THAT(negative.output, Contains("error: --threads must be in [0, 1024] (0: one per core), "
                                       "got -1\n"));
}

TEST_CASE("a run killed with SIGKILL resumes from its newest checkpoint to the unbroken loss",
          "[cli][checkpoint]") {
  if (!purine::testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  TempDir temp;
  const std::string dir = temp.file("ckpts");
  // A step schedule: an iteration's rate does not depend on the run's total, so the killed run
  // (aiming far) and the unbroken one (as long as the resumed) train alike.
  const std::string common =
      "train --model=mlp --batch=16 --threads=1 --noevaluate --lr-policy=step --lr-step=5 ";
  {
    purine::testing::SpawnedProcess run(
        purine_binary() + " " + common +
            "--max-iters=1000000 --checkpoint-every=5 --keep=1000 --checkpoint-dir=" + dir,
        temp.file("killed.log"));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (run.running() && std::chrono::steady_clock::now() < deadline &&
           (!std::filesystem::is_directory(dir) || purine::list_checkpoints(dir).empty()))
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    REQUIRE(run.running());  // still training: the kill comes mid-run
    const int status = run.kill_all();
    REQUIRE(WIFSIGNALED(status));
    REQUIRE(WTERMSIG(status) == SIGKILL);
  }
  const auto checkpoints = purine::list_checkpoints(dir);
  REQUIRE(!checkpoints.empty());
  const int64_t total = checkpoints.front().first + 12;
  INFO("killed after iteration " << checkpoints.front().first << "; total " << total);
  Result resumed =
      run_purine(common + "--max-iters=" + std::to_string(total) + " --checkpoint-dir=" + dir +
                 " --resume --summary=" + temp.file("resumed.json"));
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  REQUIRE_THAT(resumed.output, Contains("resuming from " + checkpoints.front().second));
  // Without --resume the same command would start over into the killed run's checkpoints.
  Result fresh =
      run_purine(common + "--max-iters=" + std::to_string(total) + " --checkpoint-dir=" + dir);
  CHECK(fresh.status != 0);
  CHECK_THAT(fresh.output, Contains("error: --checkpoint-dir '" + dir +
                                    "' already holds the checkpoints of a run"));
  Result whole = run_purine(common + "--max-iters=" + std::to_string(total) +
                            " --summary=" + temp.file("whole.json"));
  REQUIRE(whole.status == 0);
  CHECK(final_loss(temp.file("resumed.json")) == final_loss(temp.file("whole.json")));
}

TEST_CASE("write errors and unwritable outputs end the run with an error", "[cli][checkpoint]") {
  if (!purine::testing::have_fashion_mnist()) {
    WARN("skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  TempDir temp;
  const std::string common = "train --model=mlp --batch=16 --threads=1 --noevaluate --max-iters=3 ";
  write_file(temp.file("a_file"), "not a directory");
  struct Case {
    std::string flags, message;
  };
  for (const Case& c : {
           Case{"--summary=/dev/full", "'/dev/full': No space left on device"},
           Case{"--checkpoint=/dev/full", "cannot save the checkpoint: failed writing '/dev/full'"},
           Case{"--checkpoint-dir=" + temp.file("a_file") + "/ckpts",
                "checkpoint directory '" + temp.file("a_file") + "/ckpts'"},
           Case{"--checkpoint=" + temp.file("a_file") + "/ckpt", "Not a directory"},
           Case{"--trace=" + temp.file("a_file") + "/trace.json", "the trace file"},
           Case{"--summary=" + temp.file("a_file") + "/summary.json", "the summary file"},
           Case{"--resume-from=/dev/zero", "'/dev/zero' is not a Purine checkpoint"},
           Case{"--resume-from=" + temp.file("a_file"), "not a Purine checkpoint"},
           Case{"--checkpoint-every=5", "--checkpoint-every needs --checkpoint-dir"},
           Case{"--resume=" + temp.file("ckpt"),
                "for a file use --resume-from=" + temp.file("ckpt")},
           Case{"--resume", "--resume continues from --checkpoint-dir or --checkpoint=FILE"},
           Case{"--checkpoint-dir=" + temp.path() + " --keep=0", "--keep must be at least 1"},
           Case{"--checkpoint-dir=" + temp.file("empty") + " --resume",
                "no complete checkpoint in '" + temp.file("empty") + "'"},
       }) {
    INFO(c.flags);
    Result r = run_purine(common + c.flags);
    INFO(r.output);
    CHECK(r.status != 0);
    CHECK_THAT(r.output, Contains("error: ") && Contains(c.message));
  }
  // Another model's checkpoint, larger than mlp's could be, is told by its model.
  REQUIRE(run_purine("train --model=convnet --batch=16 --threads=1 --noevaluate --max-iters=1 "
                     "--checkpoint=" +
                     temp.file("convnet.ckpt"))
              .status == 0);
  CHECK_THAT(run_purine(common + "--resume-from=" + temp.file("convnet.ckpt")).output,
             Contains("error: checkpoint '" + temp.file("convnet.ckpt") +
                      "' is of model 'convnet'; this run trains 'mlp'"));
  // The summary of a full disk fails after training: the checkpoint is there all the same.
  Result r = run_purine(common + "--summary=/dev/full --checkpoint=" + temp.file("ckpt"));
  CHECK(r.status != 0);
  CHECK(std::filesystem::file_size(temp.file("ckpt")) > 0);
}
