// The program the README opens with, kept compiling and working: a two-layer network written
// forward-only, its backward and SGD graphs derived, trained on one fixed batch until it fits.
#include <catch2/catch.hpp>

#include "graphs/initialize.hpp"
#include "graphs/layers.hpp"
#include "graphs/sgd.hpp"
#include "purine/autodiff.hpp"
#include "purine/dsl.hpp"
#include "purine/runnable.hpp"

using namespace purine;

TEST_CASE("the README example trains", "[readme]") {
  // --- as in README.md ---
  Graph g("net");
  Blob* images = g.add_blob("images", {64, 1, 28, 28});
  Blob* labels = g.add_blob("labels", {64});
  auto& fc1 = g.add<InnerProductLayer>("fc1", InnerProductLayer::Options{256});
  auto& fc2 = g.add<InnerProductLayer>("fc2", InnerProductLayer::Options{10});
  auto& loss = g.add<SoftmaxLossLayer>("loss");
  B{images} >> fc1 >> g.add<ActivationLayer>("relu", "relu") >> fc2;
  B{fc2.top(0), labels} >> loss;

  std::vector<Blob*> weights;
  for (const Parameter& p : g.parameters()) weights.push_back(p.blob);
  Gradients grads = backward(g, loss.top(0), weights);
  SgdGraph sgd = add_sgd(g, grads, SgdOptions{0.9, 5e-4});
  sgd.set_learning_rate(0.01);
  initialize_parameters(g, /*seed=*/1);

  Runnable step(g, RunOptions{});
  Rng rng(2);
  for (int64_t i = 0; i < images->tensor().count(); ++i)
    images->tensor().mutable_data()[i] = rng.uniform01();
  for (int64_t i = 0; i < 64; ++i) labels->tensor().mutable_data()[i] = static_cast<float>(i % 10);
  step.run();
  const float first = *loss.top(0)->tensor().data();
  for (int i = 0; i < 100; ++i) step.run();
  // --- end of the README code ---
  const float last = *loss.top(0)->tensor().data();
  REQUIRE(first == Approx(std::log(10.0)).epsilon(0.2));
  REQUIRE(last < 0.1f * first);  // a fixed batch is learned by heart
}
