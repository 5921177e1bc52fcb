#include "operators/cpu/threading.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>

namespace purine {

void set_compute_threads(int threads) {
  threads = std::max(1, threads);
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

}  // namespace purine
