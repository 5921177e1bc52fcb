// The memory plan (purine/internal/memory_plan.hpp): blobs share buffers exactly when the
// dispatcher's edges prove their values are never needed at once, observed blobs keep their own,
// and a proof through another rank becomes a dependency of this rank's plan.
#include <algorithm>
#include <catch2/catch.hpp>

#include "purine/compile.hpp"
#include "purine/runnable.hpp"

using namespace purine;

namespace {

Blob* scale(Graph& g, const std::string& name, Blob* in, double alpha) {
  return g.apply("make_" + name, "scale", Attrs().set("alpha", alpha), {in}, {name})[0];
}

bool same_memory(Blob* a, Blob* b) { return a->tensor().data() == b->tensor().data(); }

RunOptions reusing(std::set<const Blob*> observed) {
  RunOptions options;
  options.reuse_memory = true;
  options.observed = std::move(observed);
  return options;
}

}  // namespace

TEST_CASE("a chain of ops reuses the memory of values it no longer needs", "[memory]") {
  Graph g;
  Blob* x = g.add_blob("x", {1000});
  x->tensor().fill(1);
  Blob* a = scale(g, "a", x, 2);
  Blob* b = scale(g, "b", a, 3);
  Blob* c = scale(g, "c", b, 5);
  Blob* y = scale(g, "y", c, 7);
  Runnable run(g, reusing({y}));
  for (int i = 0; i < 2; ++i) {
    run.run();
    const std::vector<float> values = y->tensor().values();
    CHECK(std::all_of(values.begin(), values.end(), [](float v) { return v == 210; }));
  }
  CHECK(same_memory(a, c));   // a is dead once b is written
  CHECK(!same_memory(a, b));  // "b" reads a while writing b
  CHECK(!same_memory(b, c));
  for (Blob* other : {x, a, b, c}) CHECK(!same_memory(y, other));  // observed: its own
  const MemoryUse& use = run.memory().by_location.at(Location::cpu());
  CHECK(use.blob_bytes == 4 * 1000 * 4);  // a, b, c, y (x had memory before)
  CHECK(use.allocated_bytes == 3 * 1000 * 4);
  CHECK(run.memory().overwritten == std::set<const Blob*>{a});
}

TEST_CASE("without reuse every blob has memory of its own", "[memory]") {
  Graph g;
  Blob* x = g.add_blob("x", {1000});
  Blob* a = scale(g, "a", x, 2);
  Blob* b = scale(g, "b", a, 3);
  Blob* c = scale(g, "c", b, 5);
  Runnable run(g);
  CHECK(!same_memory(a, c));
  const MemoryUse& use = run.memory().by_location.at(Location::cpu());
  CHECK(use.allocated_bytes == use.blob_bytes);
  CHECK(use.buffers == 4);  // x too: it had no memory before
  CHECK(run.memory().overwritten.empty());
}

TEST_CASE("branches on two threads share memory only when an order separates them", "[memory]") {
  for (bool ordered : {false, true}) {
    Graph g;
    Blob* x = g.add_blob("x", {1000});
    x->tensor().fill(1);
    Blob *a1, *y1, *a2, *y2;
    {
      Graph::Placement one(g, Location::cpu(), "one");
      a1 = scale(g, "a1", x, 2);
      y1 = scale(g, "y1", a1, 3);
    }
    {
      Graph::Placement two(g, Location::cpu(), "two");
      a2 = scale(g, "a2", x, 5);
      y2 = scale(g, "y2", a2, 7);
    }
    if (ordered) g.add_order(y1->writers()[0], a2->writers()[0]);
    Runnable run(g, reusing({y1, y2}));
    for (int i = 0; i < 3; ++i) {
      run.run();
      CHECK(y1->tensor().values() == std::vector<float>(1000, 6));
      CHECK(y2->tensor().values() == std::vector<float>(1000, 35));
    }
    CHECK(same_memory(a1, a2) == ordered);
  }
}

TEST_CASE("swapped blobs and blobs no op writes keep their memory", "[memory]") {
  Graph g;
  Blob* counter = g.add_blob("counter", {100});
  Blob* one = g.add_blob("one", {100});
  one->tensor().fill(1);
  Blob* next = g.apply("inc", "sum", {}, {counter, one}, {"next"})[0];
  g.add_swap(counter, next);
  Blob* later = scale(g, "later", next, 2);  // written after every read of the others
  Runnable run(g, reusing({later}));
  for (int i = 0; i < 3; ++i) run.run();
  CHECK(counter->tensor().values() == std::vector<float>(100, 3));
  for (Blob* b : {counter, next, one})
    for (Blob* other : {counter, next, one, later})
      if (b != other) CHECK(!same_memory(b, other));
}

TEST_CASE("reuse proven through another rank becomes a dependency of this rank's plan",
          "[memory]") {
  // Rank 0 sends a to rank 1 and receives c back. c may take a's memory: its receive follows
  // a's send by way of rank 1. Rank 0's plan alone does not know that, so the plan gains the
  // edge send -> receive.
  for (bool reuse : {false, true}) {
    Graph g;
    Blob* x = g.add_blob("x", {1000});
    x->tensor().fill(1);
    Blob* a = scale(g, "a", x, 2);
    Blob* remote = g.copy_to(a, Location::cpu(1), Graph::kMainThread);
    Blob* b;
    {
      Graph::Placement there(g, Location::cpu(1));
      b = scale(g, "b", remote, 3);
    }
    Blob* c = g.copy_to(b, Location::cpu(0), Graph::kMainThread);
    Blob* y = scale(g, "y", c, 5);
    g.validate();
    CompileOptions options;
    options.rank = 0;
    options.reuse_memory = reuse;
    options.observed = {y};
    const CompiledGraph compiled = compile(g, options);
    const dispatch::TaskId send = compiled.tasks.at(remote->writers()[0]);
    const dispatch::TaskId receive = compiled.tasks.at(c->writers()[0]);
    const auto& after_send = compiled.plan.successors()[send];
    const bool ordered = std::count(after_send.begin(), after_send.end(), receive) > 0;
    CHECK(ordered == reuse);
    CHECK(same_memory(a, c) == reuse);
  }
}

TEST_CASE("the plan orders long graphs when they hold enough memory to be worth it", "[memory]") {
  // 20000 ops: their ancestor sets take 48 MB. Blobs of 64 Ki floats (5 GB unshared) are worth
  // it, and the chain runs in three buffers; blobs of 16 floats (1.3 MB) are not.
  for (const int64_t count : {int64_t{65536}, int64_t{16}}) {
    Graph g;
    Blob* x = g.add_blob("x", {count});
    x->tensor().fill(1);  // memory of its own before the plan
    Blob* last = x;
    for (int i = 0; i < 20000; ++i) last = scale(g, "v" + std::to_string(i), last, 1);
    g.validate();
    CompileOptions options;
    options.reuse_memory = true;
    options.observed = {last};
    const MemoryUse use = compile(g, options).memory.by_location.at(Location::cpu());
    CHECK(use.blob_bytes == 20000 * count * 4);
    CHECK(use.allocated_bytes == (count == 16 ? use.blob_bytes : 3 * count * 4));
  }
}

TEST_CASE("a rank's plan orders only its own ops, however many the other ranks have",
          "[memory]") {
  // Every rank builds the whole graph of a layout. Rank 1's 20000 ops would take 48 MB of
  // ancestor sets over all ops, too much for the 1.3 MB rank 0 could share; over rank 0's 5 ops
  // they take 160 KB, and rank 0's chain runs in three buffers as it would alone.
  Graph g;
  Blob* x = g.add_blob("x", {65536});
  x->tensor().fill(1);
  Blob* last = x;
  for (int i = 0; i < 4; ++i) last = scale(g, "v" + std::to_string(i), last, 1);
  {
    Graph::Placement there(g, Location::cpu(1));
    Blob* far = g.add_blob("far", {16});
    for (int i = 0; i < 20000; ++i) far = scale(g, "w" + std::to_string(i), far, 1);
  }
  g.validate();
  CompileOptions options;
  options.rank = 0;
  options.reuse_memory = true;
  options.observed = {last};
  const MemoryUse use = compile(g, options).memory.by_location.at(Location::cpu());
  CHECK(use.blob_bytes == 4 * 65536 * 4);
  CHECK(use.allocated_bytes == 3 * 65536 * 4);  // v2 takes v0's buffer
}
