// What the model tests share: a model trains on Fashion-MNIST when 40 iterations of batch 16 at
// a fixed rate bring the mean loss of the last 8 iterations more than 0.3 below that of the first
// 8. Skips, saying so, without the data set.
#pragma once

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "fashion_mnist.hpp"
#include "train/trainer.hpp"

namespace purine::testing {

inline void check_trains_on_fashion_mnist(const std::string& model) {
  if (!have_fashion_mnist()) {
    WARN("training skipped: Fashion-MNIST not installed (run tools/setup.sh)");
    return;
  }
  TrainOptions o;
  o.model = model;
  o.data_dir = kFashionMnistDir;
  o.batch = 16;
  o.max_iters = 40;
  o.lr = 0.02;
  o.lr_policy = LrPolicy::kFixed;
  o.threads = 2;
  o.evaluate = false;
  std::vector<float> losses;
  Trainer(o).train([&losses](const TrainProgress& p) { losses.push_back(p.loss); });
  REQUIRE(losses.size() == 40);
  double first = 0, last = 0;
  for (int i = 0; i < 8; ++i) {
    first += losses[i] / 8;
    last += losses[32 + i] / 8;
  }
  INFO(model << ": mean loss of the first 8 iterations " << first << ", of the last 8 " << last);
  CHECK(last < first - 0.3);
}

}  // namespace purine::testing
