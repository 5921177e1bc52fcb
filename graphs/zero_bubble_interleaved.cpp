#include "graphs/zero_bubble_interleaved.hpp"

#include <algorithm>
#include <limits>
#include <optional>

#include "base/error.hpp"

namespace purine {

ZeroBubbleOrders zero_bubble_interleaved(int stages, int micro_batches, int chunks,
                                         const std::vector<double>& stage_costs) {
  require(stages >= 1 && micro_batches >= 1 && chunks >= 1,
          "zero_bubble_interleaved: needs at least 1 stage, micro-batch and chunk, got ", stages,
          ", ", micro_batches, ", ", chunks);
  const int S = stages, M = micro_batches, V = chunks, last = S * V - 1;
  require(stage_costs.empty() || static_cast<int>(stage_costs.size()) == S * V,
          "zero_bubble_interleaved: ", stage_costs.size(), " stage costs for ", S * V, " stages");
  // Each pass of stage j takes a third of its cost (one unit without costs).
  auto duration = [&](int j) { return stage_costs.empty() ? 1.0 : stage_costs[j] / 3; };
  constexpr double kNotYet = -1;
  // When each pass of (micro-batch m, stage j) ends, once started.
  auto table = [&] {
    return std::vector<std::vector<double>>(M, std::vector<double>(S * V, kNotYet));
  };
  std::vector<std::vector<double>> forward = table(), backward = table(), weight = table();
  auto ended_by = [](double end, double now) { return end != kNotYet && end <= now; };

  ZeroBubbleOrders result;
  result.orders.resize(S);
  std::vector<int> held(S, 0), limit(S);
  for (int s = 0; s < S; ++s) limit[s] = std::min((V - 1) * S + 2 * (S - 1 - s) + 1, M * V);
  std::vector<double> free_at(S, 0);
  const size_t work = 3 * static_cast<size_t>(M) * V;
  // Starts a pass at each free location (in order) that has one ready at `now`; the forwards of
  // micro-batch `over_limit` may go past the limit. Returns whether any started.
  auto start_passes = [&](double now, int over_limit) {
    bool started = false;
    for (int s = 0; s < S; ++s) {
      if (free_at[s] > now || result.orders[s].size() == work) continue;
      std::optional<PipelineStep> pick;
      // B, then F, then W, each of the earliest micro-batch, the later chunk first.
      for (Pass pass : {Pass::kBackward, Pass::kForward, Pass::kWeight}) {
        for (int m = 0; m < M && !pick; ++m)
          for (int c = V - 1; c >= 0 && !pick; --c) {
            const int j = c * S + s;
            bool ready = false;
            if (pass == Pass::kForward)
              ready = forward[m][j] == kNotYet && (j == 0 || ended_by(forward[m][j - 1], now)) &&
                      (held[s] < limit[s] || m == over_limit);
            else if (pass == Pass::kBackward)
              ready = backward[m][j] == kNotYet && ended_by(forward[m][j], now) &&
                      (j == last || ended_by(backward[m][j + 1], now));
            else
              ready = weight[m][j] == kNotYet && ended_by(backward[m][j], now);
            if (ready) pick = PipelineStep{pass, m, c};
          }
        if (pick) break;
      }
      if (!pick) continue;
      const int j = pick->chunk * S + s;
      auto& ends = pick->pass == Pass::kForward    ? forward
                   : pick->pass == Pass::kBackward ? backward
                                                   : weight;
      free_at[s] = ends[pick->micro_batch][j] = now + duration(j);
      held[s] += pick->pass == Pass::kForward ? 1 : pick->pass == Pass::kWeight ? -1 : 0;
      result.orders[s].push_back(*pick);
      started = true;
    }
    return started;
  };
  // Event by event: passes start at `now`, then time moves to the next end of one.
  for (double now = 0;;) {
    const bool started = start_passes(now, -1);
    const bool running =
        std::any_of(free_at.begin(), free_at.end(), [&](double t) { return t > now; });
    if (!started && !running) {
      // Every location waits: one whose activations fill its limit while the earliest
      // micro-batch still going forward needs it (possible with unequal costs, never with
      // equal ones: tests/graphs/test_zero_bubble_interleaved.cpp) lets that one through.
      int head = 0;
      while (head < M && forward[head][last] != kNotYet) ++head;
      start_passes(now, head);
    }
    double next = std::numeric_limits<double>::infinity();
    bool finished = true;
    for (int s = 0; s < S; ++s) {
      if (free_at[s] > now) next = std::min(next, free_at[s]);
      finished = finished && result.orders[s].size() == work;
    }
    if (finished) {
      result.length = *std::max_element(free_at.begin(), free_at.end());
      return result;
    }
    // Nothing running and nothing started: nothing will change.
    require(next != std::numeric_limits<double>::infinity(),
            "the interleaved zero-bubble schedule of ", S, " locations, ", V, " chunks and ", M,
            " micro-batches waits in a circle at time ", now);
    now = next;
  }
}

}  // namespace purine
