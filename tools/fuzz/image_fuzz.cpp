// libFuzzer target: purine predict's image reader (PNG through libpng, binary PGM), input layout
// in image_input.hpp.
#include "base/error.hpp"
#include "tools/fuzz/image_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    purine::fuzz::run_image_input(data, size);
  } catch (const purine::Error&) {
    // A clear error is the right answer to a bad file; any other exception aborts the run.
  }
  return 0;
}
