// Replays tests/fuzz_corpus/idx (tools/fuzz/idx_input.hpp): every input loads or throws
// purine::Error, never crashes; the seeds load.
#include <catch2/catch.hpp>

#include "fuzz_corpus.hpp"
#include "purine/base/error.hpp"
#include "tools/fuzz/idx_input.hpp"

namespace purine {

TEST_CASE("fuzz corpus: the IDX reader loads or throws purine::Error", "[idx_file][fuzz]") {
  int loaded = 0;
  for (const testing::CorpusFile& file : testing::fuzz_corpus("idx")) {
    INFO(file.path);
    const bool seed = file.path.find("/seed-") != std::string::npos;
    try {
      fuzz::run_idx_input(file.bytes.data(), file.bytes.size());
      ++loaded;
    } catch (const Error& e) {
      INFO(e.what());
      CHECK_FALSE(seed);
    }
  }
  CHECK(loaded >= 7);
}

}  // namespace purine
