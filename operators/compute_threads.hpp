// How many threads compute kernels may use, as the layers above set it (the kernels' own
// thresholds stay in cpu/threading.hpp).
#pragma once

namespace purine {

// Bounds the threads that compute kernels may use from the calling OS thread: the OpenMP team
// (oneDNN and our own loops) and OpenBLAS. Each dispatcher executor calls this on its thread.
void set_compute_threads(int threads);

}  // namespace purine
