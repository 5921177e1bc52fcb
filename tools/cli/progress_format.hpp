// How `purine train` writes the figures of its progress line and its last line.
#pragma once

#include <cmath>
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

}  // namespace purine::cli
