// Loops whose body is compiled once per vector ISA, without writing the body as a function per
// ISA: parallel_for_isa(n, parallel, fn) calls fn(i) as parallel_for does, from a copy of the
// loop compiled for AVX2 where vector_isa() has AVX2 or more, else from the x86-64 baseline's
// (the build targets the baseline). fn must be a lambda marked always_inline,
//   [&](int64_t i) __attribute__((always_inline)) { ... }
// so that its body, and the inline functions it calls, compile into each copy (and get
// vectorized for it). A file using it keeps one order of operations in every copy only if it
// builds with -ffp-contract=off (no fused multiply-add where the baseline rounds twice).
// No AVX-512 copy: GCC 12 vectorizes batch norm's eight-lane row sums (channel_sums.hpp) for
// AVX-512 with shuffles and scalar adds, and that copy's forwards over resnet20's 14x14 planes
// ran slower than the baseline's (2 Zen 5 cores, 2026-11-28, two traced training pairs: 1.00 /
// 1.04 -> 1.22 / 1.17 ms over six ops), where the AVX2 copy's gained (docs/MEASUREMENTS.md, batch
// norm).
#pragma once

#include <cstdint>

#include "operators/cpu/threading.hpp"
#include "operators/cpu/vector_isa.hpp"

namespace purine {

namespace isa_loops {
template <class Fn>
__attribute__((target("avx2"))) void call_avx2(const Fn& fn, int64_t i) {
  fn(i);
}
template <class Fn>
void call_baseline(const Fn& fn, int64_t i) {
  fn(i);
}
}  // namespace isa_loops

template <class Fn>
void parallel_for_isa(int64_t n, bool parallel, const Fn& fn) {
  parallel_for(n, parallel, [&](int64_t i) {
    call_for_vector_isa(isa_loops::call_avx2<Fn>, isa_loops::call_avx2<Fn>,
                        isa_loops::call_baseline<Fn>, fn, i);
  });
}

}  // namespace purine
