// The loop of the optimizer updates: elementwise over a weight and its state, four floats at a
// time in SSE2 (every x86-64 CPU), with streaming stores for weights larger than the caches.
//
// Why by hand: GCC leaves a loop with std::sqrt scalar (errno), as Adam's was, and one through
// a lambda's captured pointers unvectorized. Why streaming stores: the outputs are other buffers
// than the inputs (the graph swaps the new weight and state in after the run), and an ordinary
// store first reads each output line from memory; SGD reads three arrays and writes two, so it
// moves 5 instead of 7 arrays' worth of bytes. A streamed line leaves the cache, so only for
// large arrays.
//
// The loop also counts the non-finite values among the new weights, from the registers that hold
// them, so that the trainer's divergence check need not read every weight again after the
// updates (operators/sgd_update.hpp, attribute count_non_finite): a few instructions per four
// elements of a memory-bound loop.
#pragma once

#include <emmintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "base/error.hpp"
#include "operators/attrs.hpp"
#include "operators/cpu/threading.hpp"

namespace purine::cpu {

// An update op's attribute count_non_finite (0 or 1; operators/sgd_update.hpp).
inline bool counts_non_finite(const Attrs& attrs, const char* type) {
  const int64_t count = attrs.get_int("count_non_finite", 0);
  require(count == 0 || count == 1, type, ": count_non_finite must be 0 or 1, got ", count);
  return count == 1;
}

// NaN and the infinities: the floats whose exponent bits are all ones. Counted per lane (a lane
// of `counts` goes up by one for each non-finite value in it: two instructions per four values).
inline __m128i count_non_finite_lanes(__m128i counts, __m128 v) {
  const __m128i exponent = _mm_set1_epi32(0x7f800000);
  const __m128i bits = _mm_and_si128(_mm_castps_si128(v), exponent);
  return _mm_sub_epi32(counts, _mm_cmpeq_epi32(bits, exponent));  // true lanes are -1
}
inline int64_t lane_sum(__m128i counts) {
  alignas(16) int32_t lanes[4];
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes), counts);
  return int64_t{lanes[0]} + lanes[1] + lanes[2] + lanes[3];
}
inline int64_t non_finite(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return (bits & 0x7f800000u) == 0x7f800000u;
}

// Weights of at least this many floats (4 MB) get streaming stores: fc1's in convnet_bn (3.2 M
// floats); mlp's (at most 200 K floats) stay in cache.
constexpr int64_t kStreamingMinFloats = int64_t{1} << 20;

// The two ways four(i, store) writes its results.
struct StoreStreaming {
  void operator()(float* p, __m128 v) const { _mm_stream_ps(p, v); }
};
struct StoreOrdinary {
  void operator()(float* p, __m128 v) const { _mm_storeu_ps(p, v); }
};

// Runs an elementwise update of n elements on the OpenMP team (alone below `parallel_min`
// elements): four(i, store) does elements i..i+3, writing each output with store(pointer,
// value), and one(i) does element i alone, with exactly the floating-point operations of four,
// in the same order, so the result depends neither on the thread count nor on where one(i)
// takes over. Each returns the new weights it wrote; the loop returns how many of the n are not
// finite. `outputs`: the output arrays, whose alignment decides whether streaming stores are
// possible.
template <class One, class Four>
int64_t update_loop(int64_t n, std::initializer_list<const float*> outputs, int64_t parallel_min,
                    One one, Four four) {
  const uintptr_t offset = reinterpret_cast<uintptr_t>(*outputs.begin()) % 16;
  const bool aligned_alike = std::all_of(outputs.begin(), outputs.end(), [&](const float* p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == offset;
  });
  // Per thread at most n / 4 per lane: an int32 lane holds any weight under 8 G floats.
  int64_t count = 0;
  if (n < kStreamingMinFloats || !aligned_alike) {
    const int64_t blocks = n / 4;
    parallel_region(n > parallel_min, [&] {
      // A copy of its own per thread: the stores cannot alias it, so its pointers and constants
      // stay in registers (the shared closure was reloaded from memory after every store).
      const Four own_four = four;
      __m128i lanes = _mm_setzero_si128();
#pragma omp for nowait  // the region's end joins the threads
      for (int64_t b = 0; b < blocks; ++b)
        lanes = count_non_finite_lanes(lanes, own_four(4 * b, StoreOrdinary()));
      const int64_t own = lane_sum(lanes);
#pragma omp atomic
      count += own;
    });
    for (int64_t i = 4 * blocks; i < n; ++i) count += non_finite(one(i));
    return count;
  }
  // Each thread a contiguous range of whole 64-byte lines; the first elements up to a 16-byte
  // boundary one at a time.
  const int64_t head = static_cast<int64_t>((16 - offset) % 16 / sizeof(float));
#pragma omp parallel reduction(+ : count)
  {
    const int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();
    const int64_t per_thread = ((n - head) / threads + 15) / 16 * 16;
    const int64_t begin = thread == 0 ? 0 : std::min(n, head + thread * per_thread);
    const int64_t end = thread == threads - 1 ? n : std::min(n, head + (thread + 1) * per_thread);
    int64_t i = begin;
    const Four own_four = four;  // as above
    __m128i lanes = _mm_setzero_si128();
    for (; i < std::min(end, head); ++i) count += non_finite(one(i));
    for (; i + 4 <= end; i += 4)
      lanes = count_non_finite_lanes(lanes, own_four(i, StoreStreaming()));
    for (; i < end; ++i) count += non_finite(one(i));
    count += lane_sum(lanes);
    _mm_sfence();  // the streamed lines are in memory before the op reports itself done
  }
  return count;
}

}  // namespace purine::cpu
