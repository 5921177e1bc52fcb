#include "train/ring_steps.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "base/error.hpp"

namespace purine {

std::string RingStepsChoice::reason() const {
  char text[256];
  int used = std::snprintf(text, sizeof text,
                           "machine steps send %.3g bytes per gradient byte off the busiest of %d "
                           "machine%s, direct steps %.3g",
                           machine_bytes, machines, machines == 1 ? "" : "s", direct_bytes);
  if (in_order_bytes > 0)
    std::snprintf(
        text + used, sizeof text - used,
        "; %.3g with the ranks placed machine by machine, as mpirun places them by default",
        in_order_bytes);
  return text;
}

namespace {

// The most chunks (1/N of a gradient each) that one machine sends to others.
long busiest_machine_chunks(RingSteps steps, const std::vector<int>& machine_of_part) {
  std::map<int, long> leaving;
  for (const auto& [from, to] : ring_messages(steps, machine_of_part))
    if (machine_of_part[from] != machine_of_part[to]) ++leaving[machine_of_part[from]];
  long most = 0;
  for (const auto& [machine, chunks] : leaving) most = std::max(most, chunks);
  return most;
}

}  // namespace

RingStepsChoice choose_ring_steps(const std::vector<int>& machine_of_rank, int parts_per_rank) {
  require(!machine_of_rank.empty(), "choose_ring_steps: no ranks");
  require(parts_per_rank >= 1, "choose_ring_steps: ", parts_per_rank, " parts per rank");
  std::vector<int> machine_of_part;
  for (int machine : machine_of_rank)
    machine_of_part.insert(machine_of_part.end(), parts_per_rank, machine);
  const double n = static_cast<double>(machine_of_part.size());
  // Counted in whole chunks, so that ties are exact.
  const long direct = busiest_machine_chunks(RingSteps::kDirect, machine_of_part);
  const long machines = busiest_machine_chunks(RingSteps::kMachines, machine_of_part);
  RingStepsChoice c;
  c.steps = machines < direct ? RingSteps::kMachines : RingSteps::kDirect;
  c.machines =
      static_cast<int>(std::set<int>(machine_of_rank.begin(), machine_of_rank.end()).size());
  c.direct_bytes = direct / n;
  c.machine_bytes = machines / n;
  // Machine by machine: the same machines in the order each first appears, their ranks together.
  std::vector<int> in_order;
  for (int machine : machine_of_part)
    if (std::find(in_order.begin(), in_order.end(), machine) == in_order.end())
      for (int other : machine_of_part)
        if (other == machine) in_order.push_back(machine);
  if (in_order != machine_of_part)
    c.in_order_bytes = busiest_machine_chunks(RingSteps::kMachines, in_order) / n;
  return c;
}

}  // namespace purine
