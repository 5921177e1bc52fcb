// Replays tests/fuzz_corpus/idx (tools/fuzz/idx_input.hpp): every input loads or throws
// purine::Error, never crashes; the seeds load.
#include <catch2/catch.hpp>

#include "fuzz_corpus.hpp"
#include "tools/fuzz/idx_input.hpp"

namespace purine {

TEST_CASE("fuzz corpus: the IDX reader loads or throws purine::Error", "[idx_file][fuzz]") {
  CHECK(testing::replay_fuzz_corpus("idx", fuzz::run_idx_input) >= 7);
}

}  // namespace purine
