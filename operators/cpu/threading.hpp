// The one definition of when the CPU kernels' own loops use the OpenMP team at all; the team's
// size is set by set_compute_threads (operators/compute_threads.hpp).
#pragma once

#include <cstdint>

#include "operators/compute_threads.hpp"

namespace purine {

// Work sizes, in elements, at or below which a CPU kernel's loop stays on the calling thread
// (`#pragma omp parallel ... if (n > kParallelMin...)`): starting an OpenMP team costs
// microseconds, so a loop is split only when each thread gets more work than that. The values
// differ because the time spent per element does: the dearer each element, the fewer elements
// pay for a team. Choose by the kind of work in the loop, not by the operator.
// On a combined `parallel for simd`, write `if (parallel : ...)`: a bare `if` applies to the
// `simd` construct as well, and GCC then runs the loop unvectorized whenever it stays on the
// calling thread (a sum of 16K floats took 8.7 instead of 2.3 us). tools/check_openmp.sh checks.

// Copies (concat, split): a load and a store per element, bound by memory bandwidth, which
// threads share more than they add to.
constexpr int64_t kParallelMinCopy = int64_t{1} << 16;
// Cheap arithmetic: a few adds, multiplies or compares per element (sum, mul, scale, ReLU, the
// activation gradients, dropout, bias, batch norm, pooling, SGD updates, conv's chunk sums).
constexpr int64_t kParallelMinArithmetic = int64_t{1} << 15;
// Normalizations along an axis (softmax, LRN, softmax cross-entropy): several passes over each
// row or channel window, with an exp or a pow per element.
constexpr int64_t kParallelMinNormalization = int64_t{1} << 14;
// One transcendental function per element (sigmoid's exp, tanh): tens of cycles each.
constexpr int64_t kParallelMinTranscendental = int64_t{1} << 12;

}  // namespace purine
