// A counter-based random stream for dropout (operators/dropout.hpp), on the CPU and the GPU: the
// i-th number of a stream is a pure function of (key, i), so every element is drawn independently
// by whichever thread gets it, both backends draw the same numbers, and a stream is replayed
// exactly from its key. The key comes from the op's generator (two draws per run, serialized by
// the dispatcher), so a seed gives the same masks run after run. The mixer is splitmix64's
// finalizer over key + (i + 1) * the golden ratio.
#pragma once

#include <cstdint>

#include "base/host_device.hpp"
#include "base/rng.hpp"

namespace purine {

PURINE_HOST_DEVICE inline uint64_t counter_bits(uint64_t key, uint64_t index) {
  uint64_t z = key + (index + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) with 24 bits, as Rng::uniform01 (base/rng.hpp).
PURINE_HOST_DEVICE inline float counter_uniform01(uint64_t key, uint64_t index) {
  return static_cast<float>(counter_bits(key, index) >> 40) * (1.0f / 16777216.0f);
}

// A run's key: two draws of the op's generator.
inline uint64_t draw_key(Rng& rng) {
  const uint64_t high = rng.next_u32();
  return high << 32 | rng.next_u32();
}

}  // namespace purine
