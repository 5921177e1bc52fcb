// Bounds the threads that compute kernels may use from the calling OS thread: the OpenMP team
// (oneDNN and our own loops) and OpenBLAS. Each dispatcher executor calls this on its thread.
#pragma once

namespace purine {

void set_compute_threads(int threads);

}  // namespace purine
