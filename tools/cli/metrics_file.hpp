// The metrics file `purine train --metrics=FILE` writes as training goes: one JSON object per
// line, for plotting a run or watching it (tail -f):
//   {"iteration": 100, "epoch": 1, "loss": 0.52, "lr": 0.01, "images_per_sec": 1043}
//   {"iteration": 937, "epoch": 1, "test_accuracy": 0.8431}
// a line per iteration, and one per evaluation (during training, and when it ends). Each line is
// flushed as it is written. A resumed run appends to the file; any other starts it afresh.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "train/trainer.hpp"

namespace purine::cli {

class MetricsFile {
 public:
  // Opens `path`; throws purine::Error naming it when it cannot.
  MetricsFile(const std::string& path, bool append);
  ~MetricsFile();
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;

  // The iteration's line, or the evaluation's when `progress` has a test accuracy.
  void write(const TrainProgress& progress);

 private:
  // A failed write (a full disk) is a warning on stderr, once, and ends the file's lines:
  // training goes on and keeps its checkpoints.
  void write_line(const std::string& line);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace purine::cli
