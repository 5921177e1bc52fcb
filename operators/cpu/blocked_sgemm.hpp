// A GEMM split into a few fixed blocks, each one single-threaded oneDNN GEMM, so that its
// results do not depend on the thread count: the inner products' and the dense planes'
// convolutions' (inner_product.cpp, conv_dense_planes.cpp).
#pragma once

#include <cstdint>

namespace purine {

// Row-major C[M, N] = op(A) op(B) with op(A) [M, K], op(B) [K, N]; trans_* is 'N' or 'T'.
// C is split along its longer side into 1, 2 or 4 blocks chosen from the shapes alone, run by
// the calling thread's OpenMP team (one block: on the calling thread). K = 0 gives zeros.
void blocked_sgemm(char trans_a, char trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc);

}  // namespace purine
