// docs/GUIDE.md's code, compiled from the guide itself (tests/CMakeLists.txt extracts its C++
// blocks into guide_snippets.cpp) and run here: each snippet does what the guide says.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "graphs/pipeline.hpp"
#include "temp_dir.hpp"
#include "train/checkpoint_dir.hpp"
#include "train/trainer.hpp"

// Defined by the guide's snippets.
std::pair<double, double> guide_train_tiny_cnn();
std::pair<int, std::pair<double, double>> guide_train_tiny_resnet();
bool guide_check_tanh_gradient();
int guide_split_tiny_cnn();
double guide_train_split();
std::pair<int64_t, int64_t> guide_stage_memory(purine::PipelineSchedule schedule);
std::vector<float> guide_predict(const std::string& checkpoint);
purine::TrainResult guide_train_until(double target, const std::string& dir);

TEST_CASE("the guide's model trains", "[guide]") {
  const auto [first, last] = guide_train_tiny_cnn();
  CHECK(std::isfinite(first));
  CHECK(last < first);
}

TEST_CASE("the guide's branching model sums its gradients and trains", "[guide]") {
  const auto [sums, losses] = guide_train_tiny_resnet();
  CHECK(sums == 2);
  CHECK(std::isfinite(losses.first));
  CHECK(losses.second < losses.first);
}

TEST_CASE("the guide's gradient check passes", "[guide]") { CHECK(guide_check_tanh_gradient()); }

TEST_CASE("the guide's split model holds its split weights in pieces", "[guide]") {
  CHECK(guide_split_tiny_cnn() == 6);
  CHECK(std::isfinite(guide_train_split()));
}

TEST_CASE("the guide's pipeline memory follows the schedule", "[guide]") {
  const auto [gpipe4, gpipe8] = guide_stage_memory(purine::PipelineSchedule::kGPipe);
  const auto [one4, one8] = guide_stage_memory(purine::PipelineSchedule::k1F1B);
  CHECK(gpipe8 > gpipe4 * 3 / 2);  // one micro-batch's activations more for each
  CHECK(one8 < one4 * 11 / 10);    // at most two micro-batches at stage 0 either way
  CHECK(one8 < gpipe8 / 2);
}

TEST_CASE("the guide's prediction gives probabilities", "[guide]") {
  purine::testing::TempDir dir;
  const std::vector<float> p = guide_predict(dir.file("tiny.ckpt"));
  REQUIRE(p.size() == 10);
  double sum = 0;
  for (float v : p) {
    CHECK(v >= 0);
    sum += v;
  }
  CHECK(sum == Approx(1.0).margin(1e-5));
}

TEST_CASE("the guide's early stop keeps the training in a checkpoint", "[guide]") {
  purine::testing::TempDir dir;
  const purine::TrainResult r = guide_train_until(2.2, dir.file("ckpts"));
  CHECK(r.stopped);
  CHECK(r.iterations < 1000);
  REQUIRE(r.checkpoints.size() == 1);
  CHECK(r.checkpoints[0] == purine::checkpoint_file(dir.file("ckpts"), r.iteration));
}
