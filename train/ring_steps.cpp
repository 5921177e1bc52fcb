#include "train/ring_steps.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include "base/error.hpp"

namespace purine {

std::string RingStepsChoice::reason() const {
  char text[160];
  std::snprintf(text, sizeof text,
                "ring steps send %.3g bytes per gradient byte off the busiest of %d machine%s, "
                "direct steps %.3g",
                ring_bytes, machines, machines == 1 ? "" : "s", direct_bytes);
  return text;
}

RingStepsChoice choose_ring_steps(const std::vector<int>& machine_of_rank) {
  require(!machine_of_rank.empty(), "choose_ring_steps: no ranks");
  const long n = static_cast<long>(machine_of_rank.size());
  std::map<int, long> ranks_on, leaving_ring;  // per machine
  for (long r = 0; r < n; ++r) {
    ++ranks_on[machine_of_rank[r]];
    if (machine_of_rank[(r + 1) % n] != machine_of_rank[r]) ++leaving_ring[machine_of_rank[r]];
  }
  // In units of 2/N of a gradient, so that ties are exact.
  long direct = 0, ring = 0;
  for (const auto& [machine, m] : ranks_on) {
    direct = std::max(direct, m * (n - m));
    ring = std::max(ring, (n - 1) * leaving_ring[machine]);
  }
  RingStepsChoice c;
  c.steps = ring < direct ? RingSteps::kRing : RingSteps::kDirect;
  c.machines = static_cast<int>(ranks_on.size());
  c.direct_bytes = 2.0 * direct / n;
  c.ring_bytes = 2.0 * ring / n;
  return c;
}

}  // namespace purine
