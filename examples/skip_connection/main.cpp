// skip_connection: a program built against the installed purine package, as any application
// would be (see CMakeLists.txt). It
//   1. checks the declared gradient of its own operator, softsign (softsign.hpp), against
//      central differences;
//   2. builds a small network with a skip connection in the >> DSL, from its own composites:
//        x -> fc_in -> softsign -> h;   h -> fc1 -> softsign -> fc2 -> (+ h) -> fc_out -> loss
//   3. trains it with SGD on a synthetic 4-class problem, data parallel over the MPI ranks
//      (build_data_parallel: one replica per rank, the gradients summed by a ring allreduce).
// The global batch is the same for any number of ranks, so every world size follows the same
// loss trajectory (up to rounding). Exits 0 when the gradient check passes and the loss has
// fallen to under half its start, 1 otherwise, on every rank:
//   skip_connection                  one process
//   mpirun -np 2 skip_connection     two ranks
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "graphs/data_parallel.hpp"
#include "graphs/initialize.hpp"
#include "graphs/layers.hpp"
#include "operators/gradient_check.hpp"
#include "operators/registry.hpp"
#include "purine/dsl.hpp"
#include "purine/mpi.hpp"
#include "purine/mpi_bytes.hpp"
#include "purine/runnable.hpp"
#include "softsign.hpp"

using namespace purine;

namespace {

constexpr int kFeatures = 16;
constexpr int kClasses = 4;
constexpr int kWidth = 32;
constexpr int kSamples = 1024;
constexpr int kGlobalBatch = 32;
constexpr int kIterations = 60;
constexpr double kLearningRate = 0.1;
constexpr uint64_t kSeed = 1;

// ---- 1. The operator's gradient ----------------------------------------------------------

// The library's numeric gradient checker (operators/gradient_check.hpp) runs softsign and its
// GradientSpec on tensors, as autodiff runs them in a graph, and compares dL/dx with central
// differences of L(x) = sum_i r_i * softsign(x)_i for a random r.
bool softsign_gradient_matches(bool print) {
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  Tensor x(Shape{3, 5});
  for (int64_t i = 0; i < x.count(); ++i) x.mutable_data()[i] = uniform(gen);
  const GradientCheckResult result = check_operator_gradient("softsign", {}, {x});
  if (print) std::printf("softsign gradient: %s", result.describe().c_str());
  return result.passed();
}

// ---- 2. The model ------------------------------------------------------------------------

// The softsign operator as a layer, so it chains in the >> DSL.
class SoftsignLayer : public Composite {
 public:
  SoftsignLayer(Graph& graph, const std::string& name) : Composite(graph, name) {}

 protected:
  void setup() override {
    require_bottoms(1);
    make_top_op("softsign", "softsign", {}, bottom_);
  }
};

// y = x + fc2(softsign(fc1(x))). The skip connection is a "sum" op reading the block's bottom
// and the branch's top; autodiff sums the gradients of both paths into x's, in a fixed order.
class ResidualBlock : public Composite {
 public:
  ResidualBlock(Graph& graph, const std::string& name, int64_t width)
      : Composite(graph, name), width_(width) {}

 protected:
  void setup() override {
    require_bottoms(1);
    Graph& g = graph();
    Blob* x = bottom_[0];
    Blob* branch = (B{x} >> g.add<InnerProductLayer>("fc1", InnerProductLayer::Options{width_}) >>
                    g.add<SoftsignLayer>("act") >>
                    g.add<InnerProductLayer>("fc2", InnerProductLayer::Options{x->shape()[1]}))
                       .top(0);
    make_top_op("skip", "sum", {}, {x, branch});
  }

 private:
  int64_t width_;
};

// Logits [N, kClasses] of the images x [N, kFeatures].
Blob* residual_net(Graph& g, Blob* x) {
  return (B{x} >> g.add<InnerProductLayer>("fc_in", InnerProductLayer::Options{kWidth}) >>
          g.add<SoftsignLayer>("act_in") >> g.add<ResidualBlock>("block", kWidth) >>
          g.add<InnerProductLayer>("fc_out", InnerProductLayer::Options{kClasses}))
      .top(0);
}

// ---- 3. Data and training ----------------------------------------------------------------

// Points uniform in [-1, 1]^kFeatures, labelled by the largest of kClasses fixed random linear
// scores. The same on every rank (std::mt19937's sequence is fixed by the standard).
struct DataSet {
  std::vector<float> x;       // [kSamples, kFeatures]
  std::vector<float> labels;  // [kSamples], class indices as floats
};

DataSet make_data() {
  std::mt19937 gen(kSeed);
  auto uniform = [&] { return static_cast<float>(gen()) / 4294967296.0f * 2.0f - 1.0f; };
  std::vector<float> teacher(kClasses * kFeatures);
  for (float& w : teacher) w = uniform();
  DataSet data;
  for (int n = 0; n < kSamples; ++n) {
    int best = 0;
    float best_score = -1e30f;
    std::vector<float> point(kFeatures);
    for (float& v : point) v = uniform();
    for (int c = 0; c < kClasses; ++c) {
      float score = 0;
      for (int f = 0; f < kFeatures; ++f) score += teacher[c * kFeatures + f] * point[f];
      if (score > best_score) best = c, best_score = score;
    }
    data.x.insert(data.x.end(), point.begin(), point.end());
    data.labels.push_back(static_cast<float>(best));
  }
  return data;
}

struct ReplicaInputs {
  Blob* x = nullptr;
  Blob* labels = nullptr;
};

// Writes replica `replica`'s slice of global batch `iteration` into its input blobs.
void feed(const DataSet& data, const ReplicaInputs& in, int replica, int64_t iteration) {
  const int64_t batch = in.labels->shape()[0];
  float* x = in.x->tensor().mutable_data();
  float* labels = in.labels->tensor().mutable_data();
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t n = (iteration * kGlobalBatch + replica * batch + i) % kSamples;
    std::copy_n(&data.x[n * kFeatures], kFeatures, x + i * kFeatures);
    labels[i] = data.labels[n];
  }
}

// Trains for kIterations; returns the global loss of every iteration (on rank 0; empty
// elsewhere).
std::vector<double> train(int rank, int ranks) {
  require(kGlobalBatch % ranks == 0, "the global batch ", kGlobalBatch, " does not split over ",
          ranks, " ranks");
  const int batch = kGlobalBatch / ranks;
  const DataSet data = make_data();

  Graph g("skip_connection");
  std::vector<Location> locations;
  for (int r = 0; r < ranks; ++r) locations.push_back(Location::cpu(r));
  std::vector<ReplicaInputs> inputs(ranks);
  DataParallelOptions options;
  options.sgd.momentum = 0.9;
  options.sgd.weight_decay = 1e-4;
  // The single-device network, built once per replica at its location under "replica<r>".
  DataParallelGraph dp = build_data_parallel(
      g, locations,
      [&](Graph& graph, int replica, int replicas) {
        ReplicaInputs in{graph.add_blob("x", {batch, kFeatures}),
                         graph.add_blob("labels", {batch})};
        inputs[replica] = in;
        auto& loss = graph.add<SoftmaxLossLayer>("loss");
        B{residual_net(graph, in.x), in.labels} >> loss;
        ReplicaOutputs out;
        out.loss = loss.top(0);
        out.accuracy =
            graph.apply("top1", "accuracy", {}, {loss.top(1), in.labels}, {"accuracy"})[0];
        return out;
      },
      options);
  initialize_parameters(dp.checkpoint, g, kSeed, rank);

  RunOptions run;
  run.rank = rank;
  run.world_size = ranks;
  run.seed = kSeed;
  Runnable step(g, run);
  std::vector<double> losses;
  for (int64_t it = 0; it < kIterations; ++it) {
    for (int r = 0; r < ranks; ++r)
      if (locations[r].rank == rank) feed(data, inputs[r], r, it);
    dp.sgd.set_learning_rate(kLearningRate, rank);
    step.run();
    if (rank != 0) continue;
    losses.push_back(*dp.loss->tensor().data());
    if (it % 10 == 0 || it == kIterations - 1)
      std::printf("iteration %2lld  loss %.4f  accuracy %.3f\n", static_cast<long long>(it),
                  losses.back(), *dp.accuracy->tensor().data());
  }
  return losses;
}

double mean(const std::vector<double>& v, size_t begin, size_t end) {
  double sum = 0;
  for (size_t i = begin; i < end; ++i) sum += v[i];
  return sum / static_cast<double>(end - begin);
}

}  // namespace

int main(int argc, char** argv) {
  MpiContext mpi(&argc, &argv);
  try {
    bool ok = softsign_gradient_matches(mpi.rank() == 0);
    const std::vector<double> losses = train(mpi.rank(), mpi.size());
    if (mpi.rank() == 0) {
      const double first = mean(losses, 0, 5);
      const double last = mean(losses, losses.size() - 5, losses.size());
      std::printf("%d rank%s: mean loss of the first 5 iterations %.4f, of the last 5 %.4f\n",
                  mpi.size(), mpi.size() == 1 ? "" : "s", first, last);
      ok = ok && std::isfinite(last) && last < 0.5 * first;
    }
    // Rank 0's verdict, on every rank.
    ok = mpi_broadcast_bytes(ok ? "1" : "0", 0) == "1";
    if (!ok && mpi.rank() == 0) std::fprintf(stderr, "error: the check failed\n");
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    if (mpi.size() > 1) mpi.abort(1);  // the other ranks may be waiting for this one
    return 1;
  }
}
