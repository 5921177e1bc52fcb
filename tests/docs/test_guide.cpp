// docs/GUIDE.md's code, compiled from the guide itself (tests/CMakeLists.txt extracts its C++
// blocks into guide_snippets.cpp) and run here: each snippet does what the guide says.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "temp_dir.hpp"

// Defined by the guide's snippets.
std::pair<double, double> guide_train_tiny_cnn();
bool guide_check_tanh_gradient();
int guide_split_tiny_cnn();
double guide_train_split();
std::vector<float> guide_predict(const std::string& checkpoint);

TEST_CASE("the guide's model trains", "[guide]") {
  const auto [first, last] = guide_train_tiny_cnn();
  CHECK(std::isfinite(first));
  CHECK(last < first);
}

TEST_CASE("the guide's gradient check passes", "[guide]") { CHECK(guide_check_tanh_gradient()); }

TEST_CASE("the guide's split model holds its split weights in pieces", "[guide]") {
  CHECK(guide_split_tiny_cnn() == 6);
  CHECK(std::isfinite(guide_train_split()));
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
