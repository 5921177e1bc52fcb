// Pooling of many small planes at once, as vectors across planes: blocks of planes are turned
// pixel-major into a tile of vectors (tile[pixel][plane of the block]), so that each step of a
// window is one vector operation across the block, where plane by plane a window is a chain of
// scalar operations. The windows are listed once per call. Each plane's operations keep the
// plane-by-plane order of operators/cpu/pool.cpp (max: the first maximum in row-major order; avg:
// the sum in row-major order, then the scale), so every vector width gives those bits.
// Blocks of 16 planes under AVX-512, 8 under AVX2, 4 in the x86-64 baseline (vector_isa()).
#pragma once

#include "operators/pool.hpp"

namespace purine {

// Whether the lane path takes this geometry: planes of at most 4,096 pixels, and not max 2x2
// stride 2 (whose disjoint windows go row by row faster).
bool use_pool_lanes(const PoolGeometry& g);

// y = pool(x) and dx = pool_grad(x, dy) over all g.planes planes (threaded over blocks).
void pool_lanes(const PoolGeometry& g, const float* x, float* y);
void pool_grad_lanes(const PoolGeometry& g, const float* x, const float* dy, float* dx);

// The same over n images of c channels where each tensor is in channel blocks of `block` (8 or
// 16; Tensor::channel_block) or plain, as the flags say: a blocked tensor's every (image, block)
// is already a tile of vectors across channels, a plain one's is transposed into one. Any
// geometry, the plain kernels' bits (operators/cpu/pool_blocks.cpp calls them for windows other
// than max 2x2, and for mixed layouts).
void pool_lanes_blocked(const PoolGeometry& g, int64_t n, int64_t c, int64_t block, const float* x,
                        bool x_blocked, float* y, bool y_blocked);
void pool_grad_lanes_blocked(const PoolGeometry& g, int64_t n, int64_t c, int64_t block,
                             const float* x, bool x_blocked, const float* dy, bool dy_blocked,
                             float* dx, bool dx_blocked);

}  // namespace purine
