// How `purine train` writes the figures of its progress line and its last line.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace purine::cli {

// "h:mm:ss".
inline std::string format_eta(double seconds) {
  const long s = std::lround(seconds);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  return buf;
}

// Images per second to three significant digits below 100 (ResNet-50 at 224x224 on two cores
// trains at 3-4 img/s, which "%.0f" rounds by a third), whole above.
inline std::string format_rate(double images_per_sec) {
  char buf[32];
  const char* format = images_per_sec >= 100 ? "%.0f" : images_per_sec >= 10 ? "%.1f" : "%.2f";
  std::snprintf(buf, sizeof buf, format, images_per_sec);
  return buf;
}

// When purine train writes a progress line to a file or a pipe (on a terminal it rewrites one
// line at every iteration): every 100 iterations, at least every 30 seconds (a ResNet-50
// iteration at 224x224 takes 4 s on two cores, 100 of them 7 minutes), and after the last.
class ProgressSchedule {
 public:
  static constexpr int64_t kIterations = 100;
  static constexpr double kSeconds = 30;
  // Whether iteration `iteration` (the last with `last`), done `seconds` after the training
  // started, gets a line.
  bool due(int64_t iteration, bool last, double seconds) {
    if (!last && iteration % kIterations != 0 && seconds - printed_at_ < kSeconds) return false;
    printed_at_ = seconds;
    return true;
  }

 private:
  double printed_at_ = 0;  // seconds after the start of the last line
};

}  // namespace purine::cli
