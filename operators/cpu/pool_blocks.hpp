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

// y = pool(x) and dx = pool_grad(x, dy) over n images of c channels, each tensor in blocks of
// `block` or plain as its flag says (at least one blocked). Max 2x2 stride 2 with every tensor
// blocked runs here; the rest runs pool_lanes.cpp's tiles.
void pool_blocks(const PoolGeometry& g, int64_t n, int64_t c, int64_t block, const float* x,
                 bool x_blocked, float* y, bool y_blocked);
void pool_grad_blocks(const PoolGeometry& g, int64_t n, int64_t c, int64_t block, const float* x,
                      bool x_blocked, const float* dy, bool dy_blocked, float* dx, bool dx_blocked);

}  // namespace purine
