// The one definition of when the CPU kernels' own loops use the OpenMP team at all; the team's
// size is set by set_compute_threads (operators/compute_threads.hpp).
#pragma once

#include <cstdint>

#include "operators/compute_threads.hpp"

namespace purine {

// Work sizes, in elements, at or below which a CPU kernel's loop stays on the calling thread
// (parallel_for and friends below, with `n > kParallelMin...`): starting an OpenMP team costs
// microseconds, so a loop is split only when each thread gets more work than that. The values
// differ because the time spent per element does: the dearer each element, the fewer elements
// pay for a team. Choose by the kind of work in the loop, not by the operator.
// Below the size, a loop does not enter OpenMP at all: `#pragma omp parallel if (false)` still
// starts a team of one, about 1.5 us a call on 2 Zen 5 cores (a 256-float sum op took 2.3 us on a
// ring's comm thread), which every small op paid (biases, updates, small buckets' sums).
// Where a pragma is still written by hand, on a combined `parallel for simd` write
// `if (parallel : ...)`: a bare `if` applies to the `simd` construct as well, and GCC then runs
// the loop unvectorized whenever it stays on the calling thread (a sum of 16K floats took 8.7
// instead of 2.3 us). tools/check_openmp.sh checks.

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

// fn(i) for i in [0, n): on the OpenMP team, statically split, when `parallel`, else on the
// calling thread without entering OpenMP.
template <class Fn>
void parallel_for(int64_t n, bool parallel, Fn fn) {
  if (!parallel) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) fn(i);
}

// The same for an elementwise fn, vectorized either way (`omp simd`: the loop vectorizes even
// when an output is also an input, where a compiler's own overlap check would fall back to
// scalar code).
template <class Fn>
void parallel_for_simd(int64_t n, bool parallel, Fn fn) {
  if (!parallel) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) fn(i);
}

// fn() once on every thread of the OpenMP team when `parallel` (worksharing `omp for` loops
// inside split among them), else once on the calling thread, where such loops run whole.
template <class Fn>
void parallel_region(bool parallel, Fn fn) {
  if (!parallel) {
    fn();
    return;
  }
#pragma omp parallel
  fn();
}

}  // namespace purine
