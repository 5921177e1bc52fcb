// Transposes between L planes and the rows of a tile by vector shuffles: rows[q][l] is pixel q
// of plane l. Pooling runs its windows on such rows, a vector across L planes per pixel
// (pool_lanes.cpp), and the channels-last convolutions turn an image's channels into rows of
// pixels with them (conv_channels_last.cpp), as the shifted-rows weight gradient does with
// activations in channel blocks (conv_shifted_rows.cpp). Every function is inlined into its caller,
// which a file compiles once per vector ISA (the build targets plain x86-64; vector_isa.hpp picks
// the version): L = 16 under AVX-512, 8 under AVX2, 4 in the baseline. Passing these vectors
// between inlined helpers makes GCC note an ABI change (-Wpsabi) that no call outside the file
// sees: files that include this build with -Wno-psabi.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

namespace purine {

#define PURINE_LANES_INLINE inline __attribute__((always_inline))

// Vectors of L floats and of L offsets (a struct of their own: GCC 12 drops vector_size from a
// typedef in the class template that uses it).
template <int L>
struct LaneTypes {
  typedef float Lanes __attribute__((vector_size(L * sizeof(float))));
  typedef int32_t Offsets __attribute__((vector_size(L * sizeof(int32_t))));
  // Lanes at any float's address (a tensor's memory: unaligned loads and stores).
  typedef float UnalignedLanes __attribute__((vector_size(L * sizeof(float)), aligned(4)));
};

template <int L>
struct LaneTiles {
  using Lanes = typename LaneTypes<L>::Lanes;

  static PURINE_LANES_INLINE Lanes load(const float* p) {
    Lanes v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static PURINE_LANES_INLINE void store(float* p, Lanes v) { std::memcpy(p, &v, sizeof v); }

  // The even and the odd elements of a then b; and the inverse, a and b interleaved element by
  // element (zip_low: their first halves, zip_high: their second halves).
  template <int... I>
  static PURINE_LANES_INLINE Lanes even(Lanes a, Lanes b, std::integer_sequence<int, I...>) {
    return __builtin_shufflevector(a, b, (2 * I)...);
  }
  template <int... I>
  static PURINE_LANES_INLINE Lanes odd(Lanes a, Lanes b, std::integer_sequence<int, I...>) {
    return __builtin_shufflevector(a, b, (2 * I + 1)...);
  }
  template <int... I>
  static PURINE_LANES_INLINE Lanes zip_low(Lanes a, Lanes b, std::integer_sequence<int, I...>) {
    return __builtin_shufflevector(a, b, (I % 2 ? L + I / 2 : I / 2)...);
  }
  template <int... I>
  static PURINE_LANES_INLINE Lanes zip_high(Lanes a, Lanes b, std::integer_sequence<int, I...>) {
    return __builtin_shufflevector(a, b, (I % 2 ? L + L / 2 + I / 2 : L / 2 + I / 2)...);
  }
  using Index = std::make_integer_sequence<int, L>;

  // v[0..P) hold P * L consecutive floats; afterwards v[q] holds those at q, q + P, q + 2P, ...
  // (P a power of two): log2(P) rounds of splitting pairs into even and odd elements. With P =
  // L this transposes L x L.
  template <int P>
  static PURINE_LANES_INLINE void deinterleave(Lanes* v) {
#pragma GCC unroll 4
    for (int round = 1; round < P; round *= 2) {
      Lanes next[P];
#pragma GCC unroll 16
      for (int i = 0; i < P / 2; ++i) {
        next[i] = even(v[2 * i], v[2 * i + 1], Index());
        next[i + P / 2] = odd(v[2 * i], v[2 * i + 1], Index());
      }
#pragma GCC unroll 16
      for (int i = 0; i < P; ++i) v[i] = next[i];
    }
  }
  // The inverse of deinterleave<P>.
  template <int P>
  static PURINE_LANES_INLINE void interleave(Lanes* v) {
#pragma GCC unroll 4
    for (int round = 1; round < P; round *= 2) {
      Lanes next[P];
#pragma GCC unroll 16
      for (int i = 0; i < P / 2; ++i) {
        next[2 * i] = zip_low(v[i], v[i + P / 2], Index());
        next[2 * i + 1] = zip_high(v[i], v[i + P / 2], Index());
      }
#pragma GCC unroll 16
      for (int i = 0; i < P; ++i) v[i] = next[i];
    }
  }

  // L whole planes of P pixels (P = 1, 2, 4, ... up to L) lie in P consecutive vectors:
  // rows[q * ld + l] = planes[l * P + q] by deinterleave<P>. False when `plane` is none of those.
  template <int P = 1>
  static PURINE_LANES_INLINE bool packed_to_rows(const float* planes, int64_t plane, float* rows,
                                                 int64_t ld) {
    if constexpr (P > L) {
      return false;
    } else {
      if (plane != P) return packed_to_rows<2 * P>(planes, plane, rows, ld);
      Lanes v[P];
#pragma GCC unroll 16
      for (int i = 0; i < P; ++i) v[i] = load(planes + i * L);
      deinterleave<P>(v);
#pragma GCC unroll 16
      for (int i = 0; i < P; ++i) store(rows + i * ld, v[i]);
      return true;
    }
  }
  template <int P = 1>
  static PURINE_LANES_INLINE bool packed_from_rows(const float* rows, int64_t ld, int64_t plane,
                                                   float* planes) {
    if constexpr (P > L) {
      return false;
    } else {
      if (plane != P) return packed_from_rows<2 * P>(rows, ld, plane, planes);
      Lanes v[P];
#pragma GCC unroll 16
      for (int i = 0; i < P; ++i) v[i] = load(rows + i * ld);
      interleave<P>(v);
#pragma GCC unroll 16
      for (int i = 0; i < P; ++i) store(planes + i * L, v[i]);
      return true;
    }
  }

  // rows[q * ld + l] = planes[l * plane + q] for the first `lanes` planes (l < lanes; the other
  // elements of a row keep what they held). Whole blocks of L planes go by shuffles: packed, or L
  // pixels at a time as L x L transposes of rows `plane` apart.
  static PURINE_LANES_INLINE void to_rows(const float* planes, int64_t plane, int64_t lanes,
                                          float* rows, int64_t ld) {
    int64_t q = 0;
    if (lanes == L) {
      if (packed_to_rows(planes, plane, rows, ld)) return;
      for (; q + L <= plane; q += L) {
        Lanes v[L];
#pragma GCC unroll 16
        for (int l = 0; l < L; ++l) v[l] = load(planes + l * plane + q);
        deinterleave<L>(v);
#pragma GCC unroll 16
        for (int i = 0; i < L; ++i) store(rows + (q + i) * ld, v[i]);
      }
    }
    for (; q < plane; ++q)
      for (int64_t l = 0; l < lanes; ++l) rows[q * ld + l] = planes[l * plane + q];
  }
  // The inverse: planes[l * plane + q] = rows[q * ld + l] for the first `lanes` planes.
  static PURINE_LANES_INLINE void from_rows(const float* rows, int64_t ld, int64_t plane,
                                            int64_t lanes, float* planes) {
    if (lanes == L && packed_from_rows(rows, ld, plane, planes)) return;
    from_rows_apart(rows, ld, plane, lanes, planes, plane);
  }
  // The same for planes `stride` apart: planes[l * stride + q] = rows[q * ld + l] for q < count
  // (a row of pixels in channel blocks turned into a row of each channel).
  static PURINE_LANES_INLINE void from_rows_apart(const float* rows, int64_t ld, int64_t count,
                                                  int64_t lanes, float* planes, int64_t stride) {
    int64_t q = 0;
    if (lanes == L) {
      for (; q + L <= count; q += L) {
        Lanes v[L];
#pragma GCC unroll 16
        for (int i = 0; i < L; ++i) v[i] = load(rows + (q + i) * ld);
        interleave<L>(v);
#pragma GCC unroll 16
        for (int l = 0; l < L; ++l) store(planes + l * stride + q, v[l]);
      }
    }
    for (; q < count; ++q)
      for (int64_t l = 0; l < lanes; ++l) planes[l * stride + q] = rows[q * ld + l];
  }
};

}  // namespace purine
