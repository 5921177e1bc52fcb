// Replays tests/fuzz_corpus/checkpoint (tools/fuzz/checkpoint_input.hpp): every input loads or
// throws purine::Error, never crashes; the seeds load.
#include <catch2/catch.hpp>

#include "fuzz_corpus.hpp"
#include "tools/fuzz/checkpoint_input.hpp"

namespace purine {

TEST_CASE("fuzz corpus: load_checkpoint loads or throws purine::Error", "[serialize][fuzz]") {
  CHECK(testing::replay_fuzz_corpus("checkpoint", fuzz::run_checkpoint_input) >= 2);
}

}  // namespace purine
