// How one fuzz input reaches purine predict's image reader (tools/cli/image_file.hpp), shared by
// the libFuzzer target (image_fuzz.cpp) and the corpus replay test
// (tests/tools/test_fuzz_corpus.cpp): the input is the whole file, PNG or PGM or anything, read
// through read_gray_image from an in-memory file (memfd), so the reader runs exactly as on disk.
// Throws purine::Error for any bad input; anything else that escapes is a bug.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/error.hpp"
#include "tools/cli/image_file.hpp"

namespace purine::fuzz {

inline void run_image_input(const uint8_t* data, size_t size) {
  const int fd = memfd_create("purine-fuzz-image", 0);
  if (fd < 0) __builtin_trap();
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  for (size_t written = 0; written < size;) {
    const ssize_t n = write(fd, data + written, size - written);
    if (n <= 0) __builtin_trap();
    written += static_cast<size_t>(n);
  }
  const cli::GrayImage image =
      cli::read_gray_image("/proc/self/fd/" + std::to_string(fd), "fuzz input");
  // What a successful read promises.
  constexpr int64_t kSide = int64_t{1} << 31;  // so that the product below cannot wrap
  if (image.width <= 0 || image.height <= 0 || image.width > kSide || image.height > kSide ||
      image.pixels.size() != static_cast<size_t>(image.width) * static_cast<size_t>(image.height))
    __builtin_trap();
}

}  // namespace purine::fuzz
