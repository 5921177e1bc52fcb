// libFuzzer target: purine::load_checkpoint on a graph with one parameter (checkpoint_input.hpp).
#include <google/protobuf/stubs/logging.h>

#include "tools/fuzz/checkpoint_input.hpp"

namespace {
void discard(google::protobuf::LogLevel, const char*, int, const std::string&) {}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Protobuf logs every malformed string field to stderr; millions of lines slow the run.
  google::protobuf::SetLogHandler(&discard);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    purine::fuzz::run_checkpoint_input(data, size);
  } catch (const purine::Error&) {
    // A clear error is the right answer to a bad file; any other exception aborts the run.
  }
  return 0;
}
