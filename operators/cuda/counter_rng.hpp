// A counter-based random stream for the GPU kernels (dropout): the i-th number of a stream is a
// pure function of (key, i), so every element is drawn independently by whichever thread gets
// it, and a stream is replayed exactly from its key. The key comes from the op's generator (one
// draw per launch, serialized by the dispatcher), so a seed gives the same masks run after run.
// The mixer is splitmix64's finalizer over key + i * golden ratio; host tests check it.
#pragma once

#include <cstdint>

#include "operators/cuda/launch.hpp"

namespace purine::cuda {

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

}  // namespace purine::cuda
