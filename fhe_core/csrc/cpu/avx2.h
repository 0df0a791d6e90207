// AVX2 + FMA double-precision modular arithmetic for the portable CPU path (x86-64 only, chosen at run time: path.h).
//
// x86-64 has no vector 64 x 64-bit product below AVX-512, but every AVX2 CPU multiplies four doubles per
// instruction with a fused add. So the NTT rows for primes below 2^46 keep their values as integers held in
// doubles, signed and exact (the CUDA build's FP64 butterflies, cuda/ntt_math.cuh, do the same): the product
// t = y w mod q of a butterfly is
//   hi = fl(y w), lo = fma(y, w, -hi)            (hi + lo = y w exactly: |y w| < 2^96)
//   k  = round(y w52 / 2^52)                      (w52 = floor(w 2^52 / q) = w_shoup >> 12, the tables' companion)
//   t  = (hi - k q) + lo                          (both steps exact: integers below 2^53)
// For |y| < 2^50, |y w52 / 2^52 - y w / q| < |y| 2^-52 <= 1/4 and the rounding adds at most 1/2, so |t| < 3q/4.
// Words become doubles exactly (below 2^52: the bits of 2^52 + u, minus 2^52) and canonical words come back
// from x - round(x / q) q (below q in magnitude for |x| < 2^50), plus q when negative. The words are the
// scalar path's canonical residues: only the lazy intermediate values differ.
#pragma once

#include <cstdint>

#include "../common/modarith.h"
#include "path.h"

#if FHE_CPU_X86
#include <immintrin.h>
#define FHE_AVX2 __attribute__((target("avx2,fma"), always_inline)) inline
#define FHE_AVX2_FN __attribute__((target("avx2,fma")))
#endif

namespace fhe::cpu {

// NTT primes below this bound take the AVX2 rows: a forward transform of up to 17 stages keeps its values below
// 2q + 17 (3q/4) < 2^50, the bound the product above needs.
constexpr u64 kAvx2MaxPrime = u64{1} << 46;

#if FHE_CPU_X86
namespace avx2 {

constexpr double kTwoPow52 = 4503599627370496.0;
constexpr double kTwoPowMinus52 = 1.0 / kTwoPow52;
constexpr long long kTwoPow52Bits = 0x4330000000000000ll;  // the bits of 2^52: the double 2^52 + u is these | u
constexpr double kRoundingShift = 6755399441055744.0;     // 1.5 * 2^52: x + this - this rounds x to an integer

// Four words below 2^52 as doubles, exactly.
FHE_AVX2 __m256d to_double(__m256i u) {
  return _mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(u, _mm256_set1_epi64x(kTwoPow52Bits))),
                       _mm256_set1_pd(kTwoPow52));
}

// Four integers in [0, 2^52) held in doubles as words.
FHE_AVX2 __m256i to_word(__m256d x) {
  return _mm256_and_si256(_mm256_castpd_si256(_mm256_add_pd(x, _mm256_set1_pd(kTwoPow52))),
                          _mm256_set1_epi64x((1ll << 52) - 1));
}

FHE_AVX2 __m256i load_words(const u64* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
FHE_AVX2 void store_words(u64* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }

FHE_AVX2 __m256d round_int(__m256d x) {
  return _mm256_sub_pd(_mm256_add_pd(x, _mm256_set1_pd(kRoundingShift)), _mm256_set1_pd(kRoundingShift));
}

// A twiddle as the pair (w, w52 / 2^52) from the table's words (w, w_shoup), four lanes.
struct Twiddle {
  __m256d w, w_over_q;
};

FHE_AVX2 Twiddle twiddle(__m256i w, __m256i w_shoup) {
  return Twiddle{to_double(w), _mm256_mul_pd(to_double(_mm256_srli_epi64(w_shoup, 12)), _mm256_set1_pd(kTwoPowMinus52))};
}

FHE_AVX2 Twiddle twiddle(u64 w, u64 w_shoup) {
  return Twiddle{_mm256_set1_pd(static_cast<double>(w)),
                 _mm256_set1_pd(static_cast<double>(w_shoup >> 12) * kTwoPowMinus52)};
}

// y w mod q in (-3q/4, 3q/4) for integers |y| < 2^50 (see the top of this file).
FHE_AVX2 __m256d mul(__m256d y, Twiddle w, __m256d q) {
  const __m256d hi = _mm256_mul_pd(y, w.w);
  const __m256d lo = _mm256_fmsub_pd(y, w.w, hi);
  const __m256d k = _mm256_sub_pd(_mm256_fmadd_pd(y, w.w_over_q, _mm256_set1_pd(kRoundingShift)),
                                  _mm256_set1_pd(kRoundingShift));
  return _mm256_add_pd(_mm256_fnmadd_pd(k, q, hi), lo);
}

// x y mod q in (-5q/8, 5q/8) for integers |x| < 2^50 and 0 <= y < q < 2^46, y not known in advance: y / q as
// fl(y fl(1 / q)) (relative error below 2^-52, so |x y / q| is off by less than 2^-6 before the rounding).
FHE_AVX2 __m256d mul_any(__m256d x, __m256d y, __m256d q, __m256d q_inv) {
  return mul(x, Twiddle{y, _mm256_mul_pd(y, q_inv)}, q);
}

// x - round(x / q) q, in (-q/2 - 1, q/2 + 1) for |x| < 2^50 (q_inv = fl(1 / q)).
FHE_AVX2 __m256d centre(__m256d x, __m256d q, __m256d q_inv) {
  return _mm256_fnmadd_pd(round_int(_mm256_mul_pd(x, q_inv)), q, x);
}

// |x| < 2^50 -> the canonical word of x mod q.
FHE_AVX2 __m256i canonical(__m256d x, __m256d q, __m256d q_inv) {
  const __m256d r = centre(x, q, q_inv);  // |r| < q
  return to_word(_mm256_add_pd(r, _mm256_and_pd(_mm256_cmp_pd(r, _mm256_setzero_pd(), _CMP_LT_OQ), q)));
}

}  // namespace avx2
#endif

}  // namespace fhe::cpu
