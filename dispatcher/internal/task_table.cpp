#include "dispatcher/internal/task_table.hpp"

namespace purine::dispatch {

TaskTable::TaskTable(const Plan& plan, const Schedule& schedule)
    : records_(new Record[schedule.num_tasks()]),
      successors_(schedule.num_tasks() > 0 ? schedule.successors_begin(0) : nullptr) {
  for (TaskId t = 0; t < schedule.num_tasks(); ++t) {
    Record& r = records_[t];
    r.initial = schedule.in_degree(t);
    r.remaining.store(r.initial, std::memory_order_relaxed);
    r.owner = plan.tasks()[t].executor;
    r.begin = static_cast<int>(schedule.successors_begin(t) - successors_);
    r.end = static_cast<int>(schedule.successors_end(t) - successors_);
    r.task = &plan.tasks()[t];
  }
}

}  // namespace purine::dispatch
