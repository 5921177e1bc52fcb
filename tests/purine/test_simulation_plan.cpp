// The plan of every rank for simulation (purine/simulation_plan.hpp), built without tensors: a
// cross-rank copy is a send on the sending rank and a receive on the receiving one, its readers
// after the receive, executors per (location, thread), views taken as views. (Against
// compile() rank by rank on a training graph: tests/train/test_simulation.cpp.)
#include <catch2/catch.hpp>

#include "purine/simulation_plan.hpp"

using namespace purine;
using Catch::Contains;

namespace {

bool depends(const SimulationPlan& sp, int before, int after) {
  const auto& next = sp.plan.successors().at(before);
  return std::find(next.begin(), next.end(), after) != next.end();
}

// The task of that name, or else the first whose name contains it.
int task_named(const SimulationPlan& sp, const std::string& part) {
  for (int t = 0; t < static_cast<int>(sp.plan.tasks().size()); ++t)
    if (sp.plan.tasks()[t].name == part) return t;
  for (int t = 0; t < static_cast<int>(sp.plan.tasks().size()); ++t)
    if (sp.plan.tasks()[t].name.find(part) != std::string::npos) return t;
  FAIL("no task named " << part);
  return -1;
}

}  // namespace

TEST_CASE("simulation plan: a cross-rank copy is a send and a receive, on their ranks",
          "[simulation_plan]") {
  Graph g;
  Blob* x = g.add_blob("x", {3});
  Blob* doubled = g.apply("double", "scale", Attrs().set("alpha", 2.0), {x})[0];
  Blob* there = g.copy_to(doubled, Location::cpu(1), "main");
  {
    Graph::Placement at(g, Location::cpu(1), "side");
    g.apply("scale", "scale", Attrs().set("alpha", 2.0), {there});
  }
  const SimulationPlan sp = build_simulation_plan(g);
  REQUIRE(sp.ranks == 2);
  REQUIRE(sp.plan.tasks().size() == 4);
  const int twice = task_named(sp, "double"), send = task_named(sp, "(send to rank 1)"),
            receive = task_named(sp, "(receive from rank 0)"), scale = task_named(sp, "scale");
  CHECK(sp.tasks[send].role == SimulatedTask::kSend);
  CHECK(sp.tasks[send].at == Location::cpu(0));  // at the blob it sends
  CHECK(sp.tasks[receive].role == SimulatedTask::kReceive);
  CHECK(sp.tasks[receive].at == Location::cpu(1));
  CHECK(sp.plan.tasks()[send].run_first);  // as compile() marks it
  CHECK_FALSE(sp.plan.tasks()[receive].run_first);
  CHECK(depends(sp, twice, send));
  CHECK(depends(sp, send, receive));
  CHECK(depends(sp, receive, scale));
  CHECK(sp.plan.executors()[sp.plan.tasks()[scale].executor].name == "rank1:cpu/side");
  CHECK(sp.executor_rank[sp.plan.tasks()[send].executor] == 0);
  CHECK(sp.executor_rank[sp.plan.tasks()[scale].executor] == 1);
  CHECK_FALSE(x->has_tensor());  // nothing allocated
}

TEST_CASE("simulation plan: a reshape is a view, a GPU-to-host copy runs on the GPU's thread",
          "[simulation_plan]") {
  Graph g;
  Blob* x = g.add_blob("x", {2, 3});
  g.apply("flat", "reshape", Attrs().set("shape", std::vector<int64_t>{6}), {x});
  Blob* on_gpu = g.copy_to(x, Location::gpu(0), "main");
  g.copy_to(on_gpu, Location::cpu(0), "main");
  const SimulationPlan sp = build_simulation_plan(g);
  const int flat = task_named(sp, "flat");
  CHECK(sp.tasks[flat].view);
  int back = -1;
  for (int t = 0; t < static_cast<int>(sp.tasks.size()); ++t)
    if (sp.tasks[t].role == SimulatedTask::kCopy && sp.tasks[t].op->location().is_cpu()) back = t;
  REQUIRE(back >= 0);
  CHECK(sp.tasks[back].at == Location::gpu(0));
  CHECK(sp.plan.executors()[sp.plan.tasks()[back].executor].name == "rank0:gpu0/main");
}
