// A float kept or made +0 by a 0/1 flag, as bit arithmetic: pooling's gradients pick the
// window's first maximum with it (operators/cpu/pool.cpp, pool_blocks.cpp), since branches on
// random data mispredict and a select of floats would keep -0.
#pragma once

#include <cstdint>
#include <cstring>

namespace purine {

// v where take is 1, +0 where it is 0, without a branch.
inline __attribute__((always_inline)) float masked(float v, uint32_t take) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits &= 0u - take;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

}  // namespace purine
