#include "tools/cli/metrics_file.hpp"

#include <cerrno>
#include <cstring>

#include "base/error.hpp"
#include "tools/cli/summary.hpp"

namespace purine::cli {

MetricsFile::MetricsFile(const std::string& path, bool append)
    : path_(path), file_(std::fopen(path.c_str(), append ? "a" : "w")) {
  require(file_ != nullptr, "cannot write the metrics file '", path, "': ", std::strerror(errno));
}

MetricsFile::~MetricsFile() {
  if (file_) std::fclose(file_);
}

void MetricsFile::write(const TrainProgress& p) {
  std::string line = str("{\"iteration\": ", p.iteration, ", \"epoch\": ", p.epoch);
  if (p.test_accuracy)
    line += str(", \"test_accuracy\": ", json_number(*p.test_accuracy, 8), "}\n");
  else
    line +=
        str(", \"loss\": ", json_number(p.loss, 9), ", \"lr\": ", json_number(p.learning_rate, 8),
            ", \"images_per_sec\": ", json_number(p.images_per_sec, 8), "}\n");
  write_line(line);
}

void MetricsFile::write_line(const std::string& line) {
  if (!file_) return;
  if (std::fputs(line.c_str(), file_) >= 0 && std::fflush(file_) == 0) return;
  std::fprintf(stderr,
               "warning: cannot write the metrics file '%s' (%s); training goes on "
               "without it\n",
               path_.c_str(), std::strerror(errno));
  std::fclose(file_);
  file_ = nullptr;
}

}  // namespace purine::cli
