// Rng: a seeded pseudo-random generator whose sequence is the same on every platform and
// standard library (mt19937 is fully specified; the conversions to floats are our own).
// Not thread-safe: the dispatcher serializes the ops sharing one Rng in a fixed order.
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace purine {

class Rng {
 public:
  explicit Rng(uint64_t seed = 1)
      : engine_(static_cast<std::mt19937::result_type>(seed ^ (seed >> 32))) {}
  void seed(uint64_t seed) {
    engine_.seed(static_cast<std::mt19937::result_type>(seed ^ (seed >> 32)));
  }
  uint32_t next_u32() { return static_cast<uint32_t>(engine_()); }
  // Uniform in [0, 1) with 24 bits of precision.
  float uniform01() { return static_cast<float>(next_u32() >> 8) * (1.0f / 16777216.0f); }
  float uniform(float low, float high) { return low + (high - low) * uniform01(); }
  // Box-Muller, one value per call (the pair's second half is discarded for simplicity).
  float gaussian(float mean, float stddev);
  // Uniform integer in [0, n).
  uint64_t below(uint64_t n) { return next_u32() % n; }

  // The generator's whole state as text, and back (for checkpoints): after set_state(state())
  // of another Rng, both draw the same sequence. set_state throws purine::Error on bad text.
  std::string state() const;
  void set_state(const std::string& state);

 private:
  std::mt19937 engine_;
};

}  // namespace purine
