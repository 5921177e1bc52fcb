// Pooling of tensors in channel blocks (Tensor::channel_block: [N, C/b, H, W, b]), the vector
// across the b channels of a pixel. Each channel gets the plain kernels' bits
// (operators/cpu/pool.cpp): max takes the first maximum of the window in row-major order, avg
// sums the window in row-major order and then scales; a max 2x2 stride 2 gradient writes each
// element once (here), the others add into zeros in the order of the outputs (pool_lanes.cpp's
// loops over tiles, which a block already is).
#pragma once

#include <cstdint>

#include "operators/pool.hpp"

namespace purine {

// y = pool(x) and dx = pool_grad(x, dy) over n images of c channels in blocks of `block`.
void pool_blocks(const PoolGeometry& g, int64_t n, int64_t c, int64_t block, const float* x,
                 float* y);
void pool_grad_blocks(const PoolGeometry& g, int64_t n, int64_t c, int64_t block, const float* x,
                      const float* dy, float* dx);

}  // namespace purine
