// The fuzz corpus under tests/fuzz_corpus/<target>/: the fuzzers' seeds and every input that once
// crashed a reader or was a finding (tools/fuzz/run.sh), replayed by the normal test suite.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/error.hpp"

namespace purine::testing {

struct CorpusFile {
  std::string path;
  std::vector<uint8_t> bytes;
};

// The files of tests/fuzz_corpus/<target>, sorted by name; at least one. PURINE_FUZZ_CORPUS_DIR
// comes from tests/CMakeLists.txt.
inline std::vector<CorpusFile> fuzz_corpus(const std::string& target) {
  const std::filesystem::path dir = std::filesystem::path(PURINE_FUZZ_CORPUS_DIR) / target;
  std::vector<CorpusFile> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    files.push_back(
        {entry.path().string(), std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {})});
  }
  std::sort(files.begin(), files.end(),
            [](const CorpusFile& a, const CorpusFile& b) { return a.path < b.path; });
  REQUIRE_FALSE(files.empty());
  return files;
}

// Feeds every file of the corpus to `run(data, size)`: each must load or throw purine::Error
// (anything else escapes and fails the test), and every seed ("seed-*") must load. Returns how
// many loaded.
template <typename Run>
int replay_fuzz_corpus(const std::string& target, Run run) {
  int loaded = 0;
  for (const CorpusFile& file : fuzz_corpus(target)) {
    INFO(file.path);
    const bool seed = file.path.find("/seed-") != std::string::npos;
    try {
      run(file.bytes.data(), file.bytes.size());
      ++loaded;
    } catch (const Error& e) {
      INFO(e.what());
      CHECK_FALSE(seed);
    }
  }
  return loaded;
}

}  // namespace purine::testing
