// merge_traces: joins Chrome-trace JSON files (one per rank, as `purine train --trace=FILE`
// writes them: FILE.rank0, FILE.rank1, ...) into one file that Perfetto (ui.perfetto.dev) or
// chrome://tracing opens with every rank as its own process. Ranks on one machine share the
// steady clock, so their events line up.
//
//   merge_traces OUTPUT INPUT [INPUT...]
//
// Prints the number of inputs merged; on a missing, unreadable or malformed input it prints one
// "error: ..." line naming the file and exits non-zero.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "dispatcher/tracer.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OUTPUT INPUT [INPUT...]\n", argv[0]);
    return 2;
  }
  const std::string output = argv[1];
  const std::vector<std::string> inputs(argv + 2, argv + argc);
  try {
    purine::dispatch::Tracer::merge_chrome_traces(inputs, output);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  std::printf("merged %zu trace files into %s\n", inputs.size(), output.c_str());
  return 0;
}
