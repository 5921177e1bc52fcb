// Running graphs: failures surface with the op's name, swaps make iterations, and the parallel
// dispatcher gives bit-identical results to the serial one, random ops included; several CPU
// locations in one process copy between each other and share the compute threads.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "dispatcher/emulated_devices.hpp"
#include "operators/cuda/gpu_test.hpp"
#include "operators/registry.hpp"
#include "purine/dsl.hpp"
#include "purine/runnable.hpp"

using namespace purine;
using Catch::Contains;

TEST_CASE("an op failure is rethrown from run() naming the op, the next run works", "[runnable]") {
  Graph g;
  Blob* logits = g.add_blob("logits", {2, 3});
  Blob* labels = g.add_blob("labels", {2});
  Blob* loss = g.apply("loss", "softmax_cross_entropy", {}, {logits, labels})[0];
  Runnable run(g);
  labels->tensor().mutable_data()[1] = 7;  // out of range
  REQUIRE_THROWS_WITH(run.run(), Contains("loss"));
  labels->tensor().mutable_data()[1] = 2;
  REQUIRE_NOTHROW(run.run());
  REQUIRE(*loss->tensor().data() == Approx(std::log(3.0)));
}

TEST_CASE("swaps after each run turn a graph into an iteration", "[runnable]") {
  // counter_next = counter + 1, swapped after every run.
  Graph g;
  Blob* counter = g.add_blob("counter", {1});
  Blob* one = g.add_blob("one", {1});
  one->tensor().fill(1);
  Blob* next = g.apply("inc", "sum", {}, {counter, one}, {"next"})[0];
  g.add_swap(counter, next);
  Runnable run(g);
  for (int i = 0; i < 5; ++i) run.run();
  REQUIRE(*counter->tensor().data() == 5);
}

namespace {
// A small random network with dropout (shared RNG) on two threads, or with `any_thread` its
// activations on Graph::kAnyThread.
std::vector<float> run_dropout_net(dispatch::Mode mode, int runs, bool any_thread = false) {
  Graph g;
  Blob* x = g.add_blob("x", {8, 16});
  x->tensor().fill(1);
  std::vector<Blob*> outs;
  for (int branch = 0; branch < 4; ++branch) {
    Graph::Placement p(g, Location::cpu(), branch % 2 ? "odd" : "even");
    Attrs a;
    a.set("ratio", 0.5);
    auto y = g.apply("drop" + std::to_string(branch), "dropout", a, {x});
    Graph::Placement act(g, Location::cpu(), any_thread ? Graph::kAnyThread : g.current_thread());
    outs.push_back(g.apply("act" + std::to_string(branch), "tanh", {}, {y[0]})[0]);
  }
  Blob* total = g.apply("total", "sum", {}, outs)[0];
  RunOptions options;
  options.mode = mode;
  options.seed = 42;
  Runnable run(g, options);
  std::vector<float> values;
  for (int r = 0; r < runs; ++r) {
    run.run();
    const float* p = total->tensor().data();
    values.insert(values.end(), p, p + total->tensor().count());
  }
  return values;
}
}  // namespace

TEST_CASE("parallel and serial dispatchers agree bit for bit with a shared RNG", "[runnable]") {
  auto serial = run_dropout_net(dispatch::Mode::kSerial, 3);
  for (int repeat = 0; repeat < 5; ++repeat) {
    auto parallel = run_dropout_net(dispatch::Mode::kParallel, 3);
    REQUIRE(parallel.size() == serial.size());
    REQUIRE(std::memcmp(parallel.data(), serial.data(), serial.size() * sizeof(float)) == 0);
  }
  // The three runs drew different masks.
  REQUIRE(std::memcmp(serial.data(), serial.data() + 128, 128 * sizeof(float)) != 0);
}

TEST_CASE("restored random generator states repeat the masks drawn after them", "[runnable]") {
  // Build the dropout net's graph twice; the second Runnable takes the first's RNG states after
  // one run, so its first run draws the masks of the first Runnable's second run.
  auto build = [](Graph& g) {
    Blob* x = g.add_blob("x", {4, 8});
    x->tensor().fill(1);
    Attrs a;
    a.set("ratio", 0.5);
    return g.apply("drop", "dropout", a, {x})[0];
  };
  Graph g1, g2;
  Blob* y1 = build(g1);
  Blob* y2 = build(g2);
  RunOptions options;
  options.seed = 9;
  Runnable first(g1, options), second(g2, options);
  first.run();
  const auto states = first.rng_states();
  REQUIRE(states.size() == 1);
  first.run();
  second.set_rng_states(states);
  second.run();
  REQUIRE(std::memcmp(y1->tensor().data(), y2->tensor().data(), 32 * sizeof(float)) == 0);
  REQUIRE_THROWS_WITH(second.set_rng_states({{"rank3:cpu", states.begin()->second}}),
                      Contains("rank3:cpu"));
}

TEST_CASE("ops on any thread give the results of pinned ones", "[runnable]") {
  auto pinned = run_dropout_net(dispatch::Mode::kParallel, 3);
  for (int repeat = 0; repeat < 5; ++repeat) {
    auto floating = run_dropout_net(dispatch::Mode::kParallel, 3, /*any_thread=*/true);
    REQUIRE(floating.size() == pinned.size());
    REQUIRE(std::memcmp(floating.data(), pinned.data(), pinned.size() * sizeof(float)) == 0);
  }
  // A graph whose every op floats still gets an executor to run on.
  Graph g;
  Graph::Placement anywhere(g, Location::cpu(), Graph::kAnyThread);
  Blob* x = g.add_blob("x", {4});
  x->tensor().fill(2);
  Blob* y = g.apply("twice", "scale", Attrs().set("alpha", 2.0), {x})[0];
  Runnable run(g);
  run.run();
  REQUIRE(y->tensor().data()[3] == 4.0f);
}

TEST_CASE("contiguous split, reshape and concat become zero-copy views", "[runnable][views]") {
  Graph g;
  Blob* x = g.add_blob("x", {6});
  Blob* doubled = g.apply("double", "scale", Attrs().set("alpha", 2.0), {x})[0];
  Attrs split;
  split.set("axis", 0).set("sizes", std::vector<int64_t>{2, 4});
  std::vector<Blob*> parts = g.apply("split", "split", split, {doubled});
  Blob* tail = g.apply("tail", "scale", Attrs().set("alpha", -1.0), {parts[1]})[0];
  Blob* joined = g.apply("join", "concat", Attrs().set("axis", 0), {parts[0], tail})[0];
  Attrs halve;
  halve.set("axis", 0).set("sizes", std::vector<int64_t>{3, 3});
  std::vector<Blob*> halves = g.apply("halve", "split", halve, {doubled});
  Blob* halves_sum = g.apply("sum_halves", "sum", {}, halves)[0];
  halves_sum =
      g.apply("total", "reshape", Attrs().set("shape", std::vector<int64_t>{3}), {halves_sum})[0];
  Blob* grid =
      g.apply("grid", "reshape", Attrs().set("shape", std::vector<int64_t>{2, 3}), {joined})[0];
  for (int i = 0; i < 6; ++i) x->tensor().mutable_data()[i] = static_cast<float>(i + 1);
  Runnable run(g);
  run.run();
  // The concat claims parts[0] first, so this split copies; another split is a view.
  REQUIRE(parts[0]->tensor().shares_storage(joined->tensor()));
  REQUIRE(tail->tensor().shares_storage(joined->tensor()));
  REQUIRE(halves[1]->tensor().shares_storage(doubled->tensor()));
  for (int i = 0; i < 3; ++i) REQUIRE(halves_sum->tensor().data()[i] == 10 + 4 * i);
  REQUIRE(grid->tensor().shares_storage(joined->tensor()));
  const std::vector<float> expected{2, 4, -6, -8, -10, -12};
  for (int i = 0; i < 6; ++i) REQUIRE(grid->tensor().data()[i] == expected[i]);
  run.run();  // views stay right run after run
  for (int i = 0; i < 6; ++i) REQUIRE(grid->tensor().data()[i] == expected[i]);
}

TEST_CASE("strided concat keeps copying", "[runnable][views]") {
  Graph g;
  Blob* a = g.add_blob("a", {2, 1});
  Blob* b = g.add_blob("b", {2, 2});
  Blob* a2 = g.apply("a2", "scale", Attrs().set("alpha", 1.0), {a})[0];
  Blob* y = g.apply("cat", "concat", Attrs().set("axis", 1), {a2, b})[0];
  a->tensor().fill(1);
  b->tensor().fill(2);
  Runnable run(g);
  run.run();
  REQUIRE_FALSE(a2->tensor().shares_storage(y->tensor()));
  const std::vector<float> expected{1, 2, 2, 1, 2, 2};
  for (int i = 0; i < 6; ++i) REQUIRE(y->tensor().data()[i] == expected[i]);
}

TEST_CASE("views of swapped blobs follow every swap", "[runnable][views]") {
  // The shape of a sharded update: w is read through chunk views, each chunk updated on its
  // own, the chunks concatenated and reshaped into `next`, and next swapped with w after each
  // run. Chunk 0 is kept, chunk 1 doubled.
  Graph g;
  Blob* w = g.add_blob("w", {2, 3});
  Blob* flat = g.apply("flat", "reshape", Attrs().set("shape", std::vector<int64_t>{6}), {w})[0];
  Attrs split;
  split.set("axis", 0).set("sizes", std::vector<int64_t>{3, 3});
  std::vector<Blob*> chunks = g.apply("split", "split", split, {flat});
  Blob* kept = g.apply("keep", "scale", Attrs().set("alpha", 1.0), {chunks[0]})[0];
  Blob* doubled = g.apply("double", "scale", Attrs().set("alpha", 2.0), {chunks[1]})[0];
  Blob* joined = g.apply("join", "concat", Attrs().set("axis", 0), {kept, doubled})[0];
  Blob* next =
      g.apply("next", "reshape", Attrs().set("shape", std::vector<int64_t>{2, 3}), {joined})[0];
  g.add_swap(w, next);
  for (int i = 0; i < 6; ++i) w->tensor().mutable_data()[i] = static_cast<float>(i + 1);
  Runnable run(g);
  for (int i = 0; i < 3; ++i) run.run();
  // Zero-copy all the way: the chunks view w, `next` is the concat's memory under w's shape.
  REQUIRE(chunks[1]->tensor().shares_storage(w->tensor()));
  REQUIRE(next->tensor().shares_storage(joined->tensor()));
  const std::vector<float> expected{1, 2, 3, 32, 40, 48};
  for (int i = 0; i < 6; ++i) REQUIRE(w->tensor().data()[i] == expected[i]);
}

namespace {
// Records the OS thread it ran on and the OpenMP threads it was given; outputs a zero.
class ThreadProbeOp : public TypedOperator<ThreadProbeOp> {
 public:
  static constexpr char kType[] = "test_thread_probe";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 0; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>&) const override { return {{1}}; }
  std::thread::id thread;
  int omp_threads = 0;

 protected:
  void compute_cpu(const std::vector<const Tensor*>&, const std::vector<Tensor*>& outputs,
                   OpContext&) override {
    thread = std::this_thread::get_id();
    omp_threads = omp_get_max_threads();
    outputs[0]->fill(0);
  }
};
PURINE_REGISTER_OPERATOR(ThreadProbeOp);

ThreadProbeOp& probe_at(Graph& g, const std::string& name) {
  Blob* out = g.apply(name, "test_thread_probe", {}, {})[0];
  return dynamic_cast<ThreadProbeOp&>(out->writers()[0]->kernel());
}
}  // namespace

TEST_CASE(
    "CPU locations of one process: a copy between them, threads of their own, a share "
    "of the compute threads",
    "[runnable][locations]") {
  const Location first = Location::cpu(0, 0), second = Location::cpu(0, 1);
  REQUIRE(second.to_string() == "rank0:cpu1");
  REQUIRE(first.to_string() == "rank0:cpu");
  Graph g;
  Blob* x = nullptr;
  Blob* doubled = nullptr;
  ThreadProbeOp* probes[2];
  {
    Graph::Placement at(g, first);
    x = g.add_blob("x", {3});
    probes[0] = &probe_at(g, "probe0");
  }
  {
    Graph::Placement at(g, second);
    doubled = g.apply("double", "scale", Attrs().set("alpha", 2.0), {x})[0];
    probes[1] = &probe_at(g, "probe1");
  }
  // The builder brought x to the second location with a copy.
  Blob* copied = g.blob("x@rank0:cpu1");
  REQUIRE(copied->location() == second);
  REQUIRE(copied->writers()[0]->type() == "copy");
  REQUIRE(doubled->writers()[0]->inputs()[0] == copied);
  for (int i = 0; i < 3; ++i) x->tensor().mutable_data()[i] = static_cast<float>(i + 1);
  RunOptions options;
  options.compute_threads = 4;
  Runnable run(g, options);
  run.run();
  REQUIRE(doubled->location() == second);
  for (int i = 0; i < 3; ++i) REQUIRE(doubled->tensor().data()[i] == 2.0f * (i + 1));
  REQUIRE(probes[0]->thread != probes[1]->thread);  // "main" of each location
  REQUIRE(probes[0]->omp_threads == 2);             // 4 compute threads over 2 locations
  REQUIRE(probes[1]->omp_threads == 2);

  Graph alone;
  ThreadProbeOp& probe = probe_at(alone, "probe");
  Runnable single(alone, options);
  single.run();
  REQUIRE(probe.omp_threads == 4);
}

namespace {

// x on the host; relu on GPU 0's main stream, scale on its "second" stream, read back by a host
// op (copies inserted by the builder both ways).
struct GpuGraph {
  Graph g;
  Blob* x;
  Blob* y;
  GpuGraph() {
    x = g.add_blob("x", {4, 5});
    Blob* scaled;
    {
      Graph::Placement on_gpu(g, Location::gpu(0));
      Blob* r = g.apply("relu", "relu", {}, {x})[0];
      Graph::Placement second(g, Location::gpu(0), "second");
      scaled = g.apply("scale", "scale", Attrs().set("alpha", 2.0), {r})[0];
    }
    y = g.apply("back", "scale", Attrs().set("alpha", 1.0), {scaled})[0];
  }
};

}  // namespace

TEST_CASE("a graph on a GPU location runs on its streams, or says why it cannot",
          "[runnable][gpu]") {
  GpuGraph gg;
  const std::string no_gpu = testing::no_gpu_reason();
  if (!no_gpu.empty()) {
    // Every machine checks the error: it names the location and why.
    REQUIRE_THROWS_WITH(Runnable(gg.g), Contains("rank0:gpu0") && Contains("GPU"));
    WARN("the GPU run is skipped: " << no_gpu);
    return;
  }
  std::vector<float> values(20);
  for (int i = 0; i < 20; ++i) values[i] = static_cast<float>(i) - 9.5f;
  Runnable run(gg.g);
  // The host end of the copy back is page-locked, so that the copy runs on the GPU's stream.
  CHECK(gg.y->writers()[0]->inputs()[0]->tensor().is_pinned());
  for (int iteration = 0; iteration < 3; ++iteration) {
    for (float& v : values) v = -v;
    gg.x->tensor().set_values(values);
    run.run();
    const std::vector<float> y = gg.y->tensor().values();
    for (int i = 0; i < 20; ++i) CHECK(y[i] == 2 * std::max(values[i], 0.0f));
  }
}

namespace {

// Each task's last start and end, as the observers see them (device times for GPU tasks).
struct Spans : dispatch::Observer {
  std::mutex mu;
  std::map<std::string, std::pair<double, double>> ms;
  static double at(const dispatch::TaskEvent& e) {
    return std::chrono::duration<double, std::milli>(e.time.time_since_epoch()).count();
  }
  void on_task_start(const dispatch::TaskEvent& e) override {
    std::lock_guard<std::mutex> lock(mu);
    ms[*e.task_name].first = at(e);
  }
  void on_task_end(const dispatch::TaskEvent& e) override {
    std::lock_guard<std::mutex> lock(mu);
    ms[*e.task_name].second = at(e);
  }
};

}  // namespace

TEST_CASE("a copy on one GPU stream overlaps compute on another", "[runnable][gpu]") {
  PURINE_REQUIRE_GPU();
  // 256 MiB to the GPU on the "copy" stream, while the "main" stream runs a chain of scales on
  // a GPU tensor of its own; neither depends on the other.
  Graph g;
  Blob* host = g.add_blob("host", {64 << 20});
  Blob* last;
  {
    Graph::Placement on_gpu(g, Location::gpu(0));
    Blob* x = g.add_blob("x", {16 << 20});
    last = x;
    for (int i = 0; i < 20; ++i)
      last = g.apply("scale" + std::to_string(i), "scale", Attrs().set("alpha", 1.0), {last})[0];
  }
  g.copy_to(host, Location::gpu(0), "copy");
  Runnable run(g);
  Spans spans;
  run.add_observer(&spans);
  run.run();  // warm-up: first launches load the kernels
  run.run();
  const auto copy = spans.ms.at("host@rank0:gpu0::copy");
  const auto first = spans.ms.at("scale0"), final = spans.ms.at("scale19");
  INFO("copy " << copy.first << ".." << copy.second << " ms, compute " << first.first << ".."
               << final.second << " ms");
  const double overlap = std::min(copy.second, final.second) - std::max(copy.first, first.first);
  CHECK(overlap > 0.5 * std::min(copy.second - copy.first, final.second - first.first));
}

TEST_CASE("a graph spanning ranks in a process without MPI says MPI was never initialized",
          "[runnable]") {
  // This test binary never initializes MPI, as a program that forgot its MpiContext.
  Graph g("forgot_mpi");
  Blob* x = g.add_blob("x", {4});
  Graph::Placement on_rank1(g, Location::cpu(1));
  g.apply("scale", "scale", {}, {x});
  CHECK_THROWS_WITH(Runnable(g, RunOptions{}),
                    Catch::Contains("graph 'forgot_mpi' spans 2 ranks, but MPI was never "
                                    "initialized in this process") &&
                        Catch::Contains("purine::MpiContext") && Catch::Contains("mpirun -np 2"));
}

TEST_CASE("a parameter never initialized is an error at the first run, naming it", "[runnable]") {
  Graph g("forgetful");
  Blob* x = g.add_blob("x", {2, 3});
  x->tensor().fill(1.0f);
  Blob* w = g.add_blob("fc::weight", {4, 3});
  Blob* b = g.add_blob("fc::bias", {4});
  g.add_parameter({w, "fill_xavier", Attrs().set("shape", std::vector<int64_t>{4, 3}), 1.0});
  g.add_parameter({b, "fill_constant", Attrs().set("shape", std::vector<int64_t>{4}), 0.0});
  Blob* y = g.apply("ip", "inner_product", {}, {x, w})[0];
  g.apply("add_bias", "bias", {}, {y, b}, {"top"});
  Runnable run(g);
  REQUIRE_THROWS_WITH(run.run(), Catch::Contains("parameter 'fc::weight' of graph 'forgetful' is "
                                                 "all zeros, but its filler is fill_xavier: it "
                                                 "was never initialized") &&
                                     Catch::Contains("initialize_parameters()"));
  // The bias starts at zero by its filler: not an error once the weight is set.
  w->tensor().fill(0.5f);
  run.run();
  CHECK(g.blob("top")->tensor().values() == std::vector<float>(8, 1.5f));
}

namespace {
// A random graph of elementwise ops over three threads, with random orders between threads;
// its sinks (blobs no op reads) are what it computes. Returns them after two runs, with or
// without shared memory; `*shared` counts the buffers saved.
std::vector<std::vector<float>> run_random_graph(unsigned seed, bool reuse, int* shared) {
  std::mt19937 random(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(random() % n); };
  Graph g;
  std::vector<Blob*> blobs;
  for (int i = 0; i < 2; ++i) {
    blobs.push_back(g.add_blob("x" + std::to_string(i), {257}));
    std::vector<float> values(257);
    for (size_t j = 0; j < values.size(); ++j) values[j] = 0.01f * ((j * (i + 3)) % 97);
    blobs.back()->tensor().set_values(values);
  }
  std::vector<Op*> ops;
  for (int i = 0; i < 24; ++i) {
    Graph::Placement at(g, Location::cpu(), "t" + std::to_string(pick(3)));
    // Mostly recent blobs, so that values die and memory frees up.
    auto input = [&] { return blobs[blobs.size() - 1 - pick(std::min<size_t>(blobs.size(), 4))]; };
    const std::string name = "op" + std::to_string(i);
    const std::string out = "v" + std::to_string(i);
    switch (pick(3)) {
      case 0:
        blobs.push_back(g.apply(name, "scale", Attrs().set("alpha", 0.5), {input()}, {out})[0]);
        break;
      case 1:
        blobs.push_back(g.apply(name, "tanh", {}, {input()}, {out})[0]);
        break;
      default:
        blobs.push_back(g.apply(name, "sum", {}, {input(), input()}, {out})[0]);
    }
    ops.push_back(blobs.back()->writers()[0]);
    // Now and then an order from an earlier op (creation order keeps the graph acyclic).
    if (i > 2 && pick(3) == 0) g.add_order(ops[pick(ops.size() - 1)], ops.back());
  }
  RunOptions options;
  options.reuse_memory = reuse;
  std::vector<Blob*> sinks;
  for (Blob* b : blobs)
    if (b->readers().empty()) sinks.push_back(b);
  options.observed.insert(sinks.begin(), sinks.end());
  Runnable run(g, options);
  run.run();
  run.run();
  const MemoryUse& use = run.memory().by_location.at(Location::cpu());
  *shared += static_cast<int>((use.blob_bytes - use.allocated_bytes) / (257 * 4));
  std::vector<std::vector<float>> values;
  for (Blob* b : sinks) values.push_back(b->tensor().values());
  return values;
}
}  // namespace

TEST_CASE("random graphs on three threads compute the same with shared memory", "[runnable]") {
  // Under ThreadSanitizer (tools/check_threads.sh), two ops using one buffer without an edge
  // between them would be reported as a race.
  int shared = 0, unshared = 0;
  for (unsigned seed = 0; seed < 40; ++seed) {
    INFO("seed " << seed);
    CHECK(run_random_graph(seed, true, &shared) == run_random_graph(seed, false, &unshared));
  }
  CHECK(unshared == 0);
  CHECK(shared > 100);  // most graphs free buffers for later values
}

TEST_CASE("replays that run ahead read and write the host blobs of their own run",
          "[runnable][device][graph]") {
  // w += delta at an emulated GPU, delta written by the host before each run and the new w read
  // back after it: both host blobs alternate with twins (swaps), as the trainer's do with
  // RunOptions::run_ahead. Runs 1 and 2 are eager, 3 and 4 record, 5 on replay ahead.
  dispatch::ScopedEmulatedDevices emulated(1);
  Graph g;
  const Location gpu = Location::gpu(0, 0);
  const Location cpu = Location::cpu(0);
  Blob *delta, *seen, *w, *w_next;
  {
    Graph::Placement at(g, cpu);
    delta = g.add_blob("delta", {8});
    g.add_swap(delta, g.add_blob("delta::twin", {8}));
  }
  {
    Graph::Placement at(g, gpu);
    w = g.add_blob("w", {8});
    w_next = g.apply("add", "sum", {}, {w, g.copy_to(delta, gpu, Graph::kMainThread)})[0];
    g.add_swap(w, w_next);
  }
  seen = g.copy_to(w_next, cpu, Graph::kMainThread);
  {
    Graph::Placement at(g, cpu);
    g.add_swap(seen, g.add_blob("seen::twin", {8}));
  }
  RunOptions options;
  options.device_graphs = true;
  options.run_ahead = true;
  Runnable run(g, options);
  w->tensor().set_values(std::vector<float>(8, 0.0f));
  const auto sum_to = [](int k) { return std::vector<float>(8, k * (k + 1) / 2.0f); };
  bool previous_in_flight = false;
  for (int k = 1; k <= 12; ++k) {
    INFO("run " << k);
    delta->tensor().set_values(std::vector<float>(8, static_cast<float>(k)));
    run.run();
    // Run k - 1's values are back in `seen` once run k has synced, run k's in the twin once run.
    if (previous_in_flight) CHECK(seen->tensor().values() == sum_to(k - 1));
    previous_in_flight = run.run_in_flight();
    if (!previous_in_flight) CHECK(g.find_blob("seen::twin")->tensor().values() == sum_to(k));
  }
  CHECK(previous_in_flight);  // the last replay was launched ahead
  run.drain();
  CHECK(!run.run_in_flight());
  CHECK(g.find_blob("seen::twin")->tensor().values() == sum_to(12));
  CHECK(w->tensor().values() == sum_to(12));
  CHECK_THAT(run.device_graphs_state(), Contains("10 replayed runs") && Contains(", run ahead: "));
}
