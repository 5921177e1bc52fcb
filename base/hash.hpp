// The project's one set of fixed, platform-independent hashes and seed mixers: every stream
// derived from a seed (data order, per-location generators, per-parameter initialization) and
// every name-derived MPI tag uses these, so all ranks and machines agree.
#pragma once

#include <cstdint>
#include <string_view>

namespace purine {

// FNV-1a over the bytes of `text`.
constexpr uint64_t fnv1a64(std::string_view text) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : text) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return h;
}

// SplitMix64's finalizer: a bijection that spreads every input bit over the output.
constexpr uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// One SplitMix64 step from state `x`.
constexpr uint64_t splitmix64(uint64_t x) { return mix64(x + 0x9E3779B97F4A7C15ULL); }

// The seed of the stream that `seed` gives the item called `name`.
constexpr uint64_t seed_for_name(uint64_t seed, std::string_view name) {
  return splitmix64(seed ^ splitmix64(fnv1a64(name)));
}

}  // namespace purine
