// run_serial: the kSerial policy. Runs every task of the core's plan on the calling thread, one
// after the other, in the schedule's deterministic topological order; a task with poll() is
// polled (yielding in between) until it completes before the next task starts. The first failure
// is recorded in core.failure and the remaining tasks are skipped. No stall detection: a task that
// never returns blocks the caller. Observers are called as in the parallel engine.
#pragma once

namespace purine::dispatch {

struct EngineCore;

void run_serial(EngineCore& core);

}  // namespace purine::dispatch
