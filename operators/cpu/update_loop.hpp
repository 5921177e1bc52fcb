// The loop of the optimizer updates: elementwise over a weight and its state, four floats at a
// time in SSE2 (every x86-64 CPU), with streaming stores for weights larger than the caches.
//
// Why by hand: GCC leaves a loop with std::sqrt scalar (errno), as Adam's was, and one through
// a lambda's captured pointers unvectorized. Why streaming stores: the outputs are other buffers
// than the inputs (the graph swaps the new weight and state in after the run), and an ordinary
// store first reads each output line from memory; SGD reads three arrays and writes two, so it
// moves 5 instead of 7 arrays' worth of bytes. A streamed line leaves the cache, so only for
// large arrays.
#pragma once

#include <emmintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

namespace purine::cpu {

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
// takes over. `outputs`: the output arrays, whose alignment decides whether streaming stores
// are possible.
template <class One, class Four>
void update_loop(int64_t n, std::initializer_list<const float*> outputs, int64_t parallel_min,
                 One one, Four four) {
  const uintptr_t offset = reinterpret_cast<uintptr_t>(*outputs.begin()) % 16;
  const bool aligned_alike = std::all_of(outputs.begin(), outputs.end(), [&](const float* p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == offset;
  });
  if (n < kStreamingMinFloats || !aligned_alike) {
    const int64_t blocks = n / 4;
#pragma omp parallel for if (n > parallel_min)
    for (int64_t b = 0; b < blocks; ++b) four(4 * b, StoreOrdinary());
    for (int64_t i = 4 * blocks; i < n; ++i) one(i);
    return;
  }
  // Each thread a contiguous range of whole 64-byte lines; the first elements up to a 16-byte
  // boundary one at a time.
  const int64_t head = static_cast<int64_t>((16 - offset) % 16 / sizeof(float));
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();
    const int64_t per_thread = ((n - head) / threads + 15) / 16 * 16;
    const int64_t begin = thread == 0 ? 0 : std::min(n, head + thread * per_thread);
    const int64_t end = thread == threads - 1 ? n : std::min(n, head + (thread + 1) * per_thread);
    int64_t i = begin;
    for (; i < std::min(end, head); ++i) one(i);
    for (; i + 4 <= end; i += 4) four(i, StoreStreaming());
    for (; i < end; ++i) one(i);
    _mm_sfence();  // the streamed lines are in memory before the op reports itself done
  }
}

}  // namespace purine::cpu
