#include "operators/cpu/blocked_sgemm.hpp"

#include <glog/logging.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>

namespace purine {

// Each block is one single-threaded oneDNN GEMM (oneDNN runs sequentially inside an OpenMP
// region). On 2 threads this matches oneDNN's own
// threading (batch 64: 784 -> 256 and 3136 -> 1024, all three products); more blocks made the
// 3136 x 1024 weight gradient twice as slow (each block packs the shared operand again).
void blocked_sgemm(char trans_a, char trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum (a weight gradient of no images); oneDNN may leave C as it was
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return;
  }
  constexpr int64_t kMinBlockWork = int64_t{1} << 18;  // multiply-adds
  constexpr int64_t kMinBlockSide = 32;
  const bool split_rows = m > n;
  const int64_t side = split_rows ? m : n;
  const int64_t work = m * n * std::max<int64_t>(k, 1);
  int64_t blocks = 1;
  while (blocks < 4 && work / (2 * blocks) >= kMinBlockWork &&
         side / (2 * blocks) >= kMinBlockSide) {
    blocks *= 2;
  }
  const int64_t block = (side + blocks - 1) / blocks;
  auto run = [&](int64_t begin) {
    const int64_t len = std::min(block, side - begin);
    const float* a_block = a;
    const float* b_block = b;
    float* c_block = c;
    int64_t rows = m, cols = n;
    if (split_rows) {
      a_block += trans_a == 'N' ? begin * lda : begin;
      c_block += begin * ldc;
      rows = len;
    } else {
      b_block += trans_b == 'N' ? begin : begin * ldb;
      c_block += begin;
      cols = len;
    }
    dnnl_status_t status = dnnl_sgemm(trans_a, trans_b, rows, cols, k, 1.0f, a_block, lda, b_block,
                                      ldb, 0.0f, c_block, ldc);
    CHECK_EQ(status, dnnl_success) << "dnnl_sgemm failed";
  };
  if (blocks == 1) {
    // One block: keep it on this thread so that it matches a one-thread run bit for bit.
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    run(0);
    omp_set_num_threads(saved);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < blocks; ++i) {
    if (i * block < side) run(i * block);
  }
}

}  // namespace purine
