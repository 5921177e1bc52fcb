// libFuzzer target: the IDX reader (raw and gzip parsing), input layout in idx_input.hpp.
#include "base/error.hpp"
#include "tools/fuzz/idx_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    purine::fuzz::run_idx_input(data, size);
  } catch (const purine::Error&) {
    // A clear error is the right answer to a bad file; any other exception aborts the run.
  }
  return 0;
}
