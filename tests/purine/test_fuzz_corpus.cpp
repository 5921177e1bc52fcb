// Replays tests/fuzz_corpus/checkpoint (tools/fuzz/checkpoint_input.hpp): every input loads or
// throws purine::Error, never crashes; the seeds load.
#include <catch2/catch.hpp>

#include "fuzz_corpus.hpp"
#include "purine/base/error.hpp"
#include "tools/fuzz/checkpoint_input.hpp"

namespace purine {

TEST_CASE("fuzz corpus: load_checkpoint loads or throws purine::Error", "[serialize][fuzz]") {
  int loaded = 0;
  for (const testing::CorpusFile& file : testing::fuzz_corpus("checkpoint")) {
    INFO(file.path);
    const bool seed = file.path.find("/seed-") != std::string::npos;
    try {
      fuzz::run_checkpoint_input(file.bytes.data(), file.bytes.size());
      ++loaded;
    } catch (const Error& e) {
      INFO(e.what());
      CHECK_FALSE(seed);
    }
  }
  CHECK(loaded >= 2);
}

}  // namespace purine
