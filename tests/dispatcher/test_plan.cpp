// Plan building and the Schedule the engine derives from it: ids, edges, resources, the
// deterministic topological order and cycle errors.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "dispatcher/internal/schedule.hpp"
#include "dispatcher/plan.hpp"

namespace pd = purine::dispatch;

namespace {

pd::Plan plan_with_tasks(int n, int executors = 1) {
  pd::Plan plan;
  for (int e = 0; e < executors; ++e) plan.add_executor({"exec" + std::to_string(e)});
  for (int t = 0; t < n; ++t) {
    pd::Task task;
    task.name = "t" + std::to_string(t);
    task.executor = t % executors;
    plan.add_task(std::move(task));
  }
  return plan;
}

std::vector<pd::TaskId> successors(const pd::Schedule& s, pd::TaskId t) {
  return {s.successors_begin(t), s.successors_end(t)};
}

}  // namespace

TEST_CASE("Plan hands out consecutive ids and records edges and resources", "[plan]") {
  pd::Plan plan;
  CHECK(plan.add_executor({"cpu/main"}) == 0);
  CHECK(plan.add_executor({"mpi", pd::ExecutorKind::kMpi}) == 1);
  pd::Task a;
  a.name = "a";
  pd::Task b;
  b.name = "b";
  b.executor = 1;
  CHECK(plan.add_task(a) == 0);
  CHECK(plan.add_task(b) == 1);
  plan.add_dependency(0, 1);
  plan.add_dependency(0, 1);  // duplicates are fine
  const pd::ResourceId rng = plan.add_resource("rng");
  CHECK(rng == 0);
  plan.use_resource(1, rng);
  plan.use_resource(0, rng);

  REQUIRE(plan.tasks().size() == 2);
  CHECK(plan.tasks()[1].executor == 1);
  CHECK(plan.executors()[1].kind == pd::ExecutorKind::kMpi);
  CHECK(plan.successors()[0] == std::vector<pd::TaskId>{1, 1});
  CHECK(plan.successors()[1].empty());
  CHECK(plan.resources() == std::vector<std::string>{"rng"});
  CHECK(plan.resource_users()[0] == std::vector<pd::TaskId>{1, 0});
}

TEST_CASE("Plan rejects a task depending on itself", "[plan]") {
  pd::Plan plan = plan_with_tasks(2);
  CHECK_THROWS_AS(plan.add_dependency(1, 1), purine::Error);
  CHECK_THROWS_WITH(plan.add_dependency(1, 1), Catch::Contains("t1"));
}

TEST_CASE("Schedule orders tasks by Kahn's algorithm with the smallest id first", "[plan]") {
  pd::Plan plan = plan_with_tasks(5);
  plan.add_dependency(3, 1);
  plan.add_dependency(2, 0);
  const pd::Schedule s = pd::Schedule::build(plan);
  CHECK(s.order() == std::vector<pd::TaskId>{2, 0, 3, 1, 4});
  CHECK(s.in_degree(0) == 1);
  CHECK(s.in_degree(2) == 0);
  CHECK(s.tasks_on(0) == 5);
}

TEST_CASE("Schedule drops duplicate edges", "[plan]") {
  pd::Plan plan = plan_with_tasks(3);
  plan.add_dependency(0, 2);
  plan.add_dependency(0, 2);
  plan.add_dependency(1, 2);
  const pd::Schedule s = pd::Schedule::build(plan);
  CHECK(successors(s, 0) == std::vector<pd::TaskId>{2});
  CHECK(s.in_degree(2) == 2);
}

TEST_CASE("Schedule chains the users of a resource in topological order", "[plan]") {
  // 4 -> 0 and 3 -> 1 make the order 2, 3, 1, 4, 0; the users {0, 1, 2} are chained 2 -> 1 -> 0.
  pd::Plan plan = plan_with_tasks(5);
  plan.add_dependency(4, 0);
  plan.add_dependency(3, 1);
  const pd::ResourceId r = plan.add_resource("rng");
  for (pd::TaskId t : {0, 1, 2, 2}) plan.use_resource(t, r);
  const pd::Schedule s = pd::Schedule::build(plan);
  CHECK(s.order() == std::vector<pd::TaskId>{2, 3, 1, 4, 0});
  CHECK(successors(s, 2) == std::vector<pd::TaskId>{1});
  CHECK(successors(s, 1) == std::vector<pd::TaskId>{0});
  CHECK(s.in_degree(0) == 2);
  CHECK(s.in_degree(1) == 2);
}

TEST_CASE("Schedule lists the sources of each executor", "[plan]") {
  pd::Plan plan = plan_with_tasks(6, 2);  // even ids on exec0, odd on exec1
  plan.add_dependency(0, 2);
  plan.add_dependency(1, 4);
  const pd::Schedule s = pd::Schedule::build(plan);
  std::vector<pd::TaskId> s0 = s.sources(0);
  std::vector<pd::TaskId> s1 = s.sources(1);
  std::sort(s0.begin(), s0.end());
  std::sort(s1.begin(), s1.end());
  CHECK(s0 == std::vector<pd::TaskId>{0});
  CHECK(s1 == std::vector<pd::TaskId>{1, 3, 5});
  CHECK(s.tasks_on(0) == 3);
  CHECK(s.tasks_on(1) == 3);
  CHECK(s.floating_tasks() == 0);
}

TEST_CASE("Schedule spreads floating sources over the executors", "[plan]") {
  pd::Plan plan;
  plan.add_executor({"exec0"});
  plan.add_executor({"exec1"});
  for (int t = 0; t < 5; ++t) {
    pd::Task task;
    task.name = "t" + std::to_string(t);
    task.executor = t == 4 ? 0 : pd::kAnyExecutor;
    plan.add_task(std::move(task));
  }
  plan.add_dependency(0, 3);
  const pd::Schedule s = pd::Schedule::build(plan);
  CHECK(s.floating_tasks() == 4);
  CHECK(s.tasks_on(0) == 1);
  CHECK(s.tasks_on(1) == 0);
  // Floating sources 0, 1, 2 go to the executors in turn; the pinned source 4 stays on exec0.
  CHECK(s.sources(0).size() + s.sources(1).size() == 4);
  CHECK(s.sources(1).size() >= 1);
}

TEST_CASE("Schedule names the tasks of a cycle", "[plan]") {
  pd::Plan plan = plan_with_tasks(6);
  plan.add_dependency(0, 1);  // t0 feeds the cycle t1 -> t2 -> t3 -> t1; t4, t5 are fine
  plan.add_dependency(1, 2);
  plan.add_dependency(2, 3);
  plan.add_dependency(3, 1);
  plan.add_dependency(4, 5);
  try {
    pd::Schedule::build(plan);
    FAIL("no cycle error");
  } catch (const purine::Error& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("cycle"));
    CHECK_THAT(what, Catch::Contains("t1 -> t2 -> t3 -> t1"));
    CHECK_THAT(what, !Catch::Contains("t4"));
  }
}

TEST_CASE("Schedule of an empty plan is empty", "[plan]") {
  pd::Plan plan;
  const pd::Schedule s = pd::Schedule::build(plan);
  CHECK(s.num_tasks() == 0);
  CHECK(s.order().empty());
}
