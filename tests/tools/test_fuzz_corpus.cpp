// Replays tests/fuzz_corpus/image (tools/fuzz/image_input.hpp): every input is read or refused
// with purine::Error, never crashes, and what is read has width * height pixels; the seeds (PNG
// of every bit depth and colour type the reader converts, interlaced, PGM of 8 and 16 bits) read.
#include <catch2/catch.hpp>

#include "fuzz_corpus.hpp"
#include "tools/fuzz/image_input.hpp"

namespace purine {

TEST_CASE("fuzz corpus: the image reader reads or throws purine::Error", "[image_file][fuzz]") {
  CHECK(testing::replay_fuzz_corpus("image", fuzz::run_image_input) >= 9);
}

}  // namespace purine
