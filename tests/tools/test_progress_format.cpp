// The figures of purine train's progress line (tools/cli/progress_format.hpp).
#include <catch2/catch.hpp>

#include "tools/cli/progress_format.hpp"

using purine::cli::format_eta;
using purine::cli::format_rate;

TEST_CASE("images per second keep three significant digits below 100", "[cli]") {
  CHECK(format_rate(3.4213) == "3.42");
  CHECK(format_rate(0.5) == "0.50");
  CHECK(format_rate(45.26) == "45.3");
  CHECK(format_rate(99.94) == "99.9");
  CHECK(format_rate(100.4) == "100");
  CHECK(format_rate(58725.6) == "58726");
  CHECK(format_rate(0) == "0.00");
}

TEST_CASE("the time left reads hours, minutes and seconds", "[cli]") {
  CHECK(format_eta(0) == "0:00:00");
  CHECK(format_eta(59.6) == "0:01:00");
  CHECK(format_eta(3 * 3600 + 25 * 60 + 7) == "3:25:07");
  CHECK(format_eta(200 * 3600) == "200:00:00");
}

TEST_CASE("progress lines to a file come every 100 iterations or 30 seconds, and at the end",
          "[cli]") {
  purine::cli::ProgressSchedule schedule;
  CHECK_FALSE(schedule.due(1, false, 0.5));
  CHECK(schedule.due(100, false, 10));  // the 100th iteration
  CHECK_FALSE(schedule.due(101, false, 39));
  CHECK(schedule.due(102, false, 40.5));  // 30 s after the line before
  CHECK_FALSE(schedule.due(103, false, 60));
  CHECK(schedule.due(104, true, 61));  // the last
  // Slow iterations (4 s each): a line every eighth, not every hundredth.
  purine::cli::ProgressSchedule slow;
  int lines = 0;
  for (int64_t i = 1; i <= 99; ++i) lines += slow.due(i, false, 4.0 * i);
  CHECK(lines == 12);
}
