// How one fuzz input is fed to purine::load_checkpoint, shared by the libFuzzer target
// (checkpoint_fuzz.cpp) and the corpus replay test (tests/purine/test_fuzz_corpus.cpp). The first
// byte picks the layout: odd, the rest is a payload framed with a valid header and CRC (so that
// the fuzzer reaches the payload's checks); even, the rest is the whole file. The file is loaded
// into a graph with one parameter "w" [2,3] and one state "s" [3] (the graph that
// tests/fuzz_corpus/checkpoint/seed-* were saved from) with the default CheckpointInfo. Throws
// purine::Error for any bad input; anything else that escapes is a bug.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "base/error.hpp"
#include "purine/serialize.hpp"

namespace purine::fuzz {

struct CheckpointNet {
  Graph g{"net"};
  Blob* w = g.add_blob("w", {2, 3});
  Blob* s = g.add_blob("s", {3});
  CheckpointNet() {
    g.add_parameter({w, "fill_constant", {}, 1.0});
    g.add_state({s, "fill_constant", {}, 0.0});
  }
};

// A file of its own per process, removed at exit.
class ScratchFile {
 public:
  ScratchFile() {
    char name[] = "/tmp/purine-fuzz-XXXXXX";
    const int fd = ::mkstemp(name);
    if (fd < 0) throw Error("cannot create a scratch file in /tmp");
    ::close(fd);
    path_ = name;
  }
  ~ScratchFile() { std::remove(path_.c_str()); }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  const std::string& write(const uint8_t* data, size_t size) const {
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    if (f == nullptr || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) {
      throw Error("cannot write " + path_);
    }
    return path_;
  }

 private:
  std::string path_;
};

inline void run_checkpoint_input(const uint8_t* data, size_t size) {
  static CheckpointNet net;
  static ScratchFile file;
  if (size == 0) return;
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 1) bytes = checkpoint_file_bytes(bytes);
  const std::string& path =
      file.write(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  const CheckpointInfo info = load_checkpoint(net.g, path);
  // What a successful load promises.
  if (info.ranks < 1 || net.w->tensor().count() != 6) __builtin_trap();
}

}  // namespace purine::fuzz
