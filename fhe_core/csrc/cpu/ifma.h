// AVX-512 IFMA modular arithmetic for the CPU kernels (x86-64 only, chosen at run time).
//
// IFMA multiplies the low 52 bits of two 64-bit lanes and adds the low or the high 52 bits of the
// 104-bit product to a third lane (vpmadd52luq / vpmadd52huq): eight 52 x 52-bit products in two
// instructions, where the scalar path needs one 64 x 64 -> 128-bit product per residue. So the
// vector paths take primes below 2^50 (Harvey's lazy values up to 4q stay below 2^52). For larger
// primes the NTT uses the 64-bit Shoup product built from 32 x 32-bit products (mul_shoup_lazy64)
// and the other kernels keep the scalar path of common/*.h, as every kernel does on CPUs without
// IFMA.
//
// Results are canonical residues, the same words the scalar path produces: only the lazy
// intermediate values differ, so the CPU and CUDA builds stay bit-identical.
//
// Shoup's product with a 52-bit word: w52 = floor(w * 2^52 / q) = floor(w_shoup / 2^12) for the
// 64-bit companion w_shoup = floor(w * 2^64 / q) the tables store, so no new table is needed.
// For a < 2^52 and w < q, qhat = floor(a * w52 / 2^52) and a*w - qhat*q lies in [0, 2q).
#pragma once

#include <cstdint>

#include "../common/modarith.h"
#include "path.h"

#if FHE_CPU_X86
#include <immintrin.h>
// GCC 12 reports _mm512_undefined_epi32()'s deliberate self-initialisation, inlined into every
// unmasked AVX-512 intrinsic, as "may be used uninitialized": a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define FHE_IFMA __attribute__((target("avx512f,avx512ifma,avx512vl,avx512dq,avx512bw"), always_inline)) inline
#define FHE_IFMA_FN __attribute__((target("avx512f,avx512ifma,avx512vl,avx512dq,avx512bw")))
#endif

namespace fhe::cpu {

// Primes below this bound take the IFMA paths: 4q < 2^52.
constexpr u64 kIfmaMaxPrime = u64{1} << 50;
constexpr u64 kMask52 = (u64{1} << 52) - 1;

#if FHE_CPU_X86
namespace ifma {

FHE_IFMA __m512i set1(u64 v) { return _mm512_set1_epi64(static_cast<long long>(v)); }
FHE_IFMA __m512i load(const u64* p) { return _mm512_loadu_si512(p); }
FHE_IFMA void store(u64* p, __m512i v) { _mm512_storeu_si512(p, v); }

// x in [0, 2m) -> x mod m: x - m wraps above x when x < m.
FHE_IFMA __m512i csub(__m512i x, __m512i m) { return _mm512_min_epu64(x, _mm512_sub_epi64(x, m)); }

// a * w mod q in [0, 2q) for a < 2^52, w < q < 2^51, w52 = floor(w * 2^52 / q).
FHE_IFMA __m512i mul_shoup_lazy(__m512i a, __m512i w, __m512i w52, __m512i q) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i qhat = _mm512_madd52hi_epu64(zero, a, w52);
  const __m512i product = _mm512_madd52lo_epu64(zero, a, w);
  // product - qhat*q = product + qhat*(2^52 - q) mod 2^52: the subtraction folds into the
  // multiply-add (2^52 - q is loop-invariant wherever this is inlined, so it is hoisted)
  const __m512i neg_q = _mm512_sub_epi64(set1(u64{1} << 52), q);
  return _mm512_and_si512(_mm512_madd52lo_epu64(product, qhat, neg_q), set1(kMask52));
}

// The high 64 bits of a * b from four 32 x 32-bit products (AVX-512 has no 64-bit high product).
FHE_IFMA __m512i mulhi64(__m512i a, __m512i b) {
  const __m512i low32 = set1(0xffffffffu);
  const __m512i a_hi = _mm512_srli_epi64(a, 32), b_hi = _mm512_srli_epi64(b, 32);
  const __m512i ll = _mm512_mul_epu32(a, b), lh = _mm512_mul_epu32(a, b_hi);
  const __m512i hl = _mm512_mul_epu32(a_hi, b), hh = _mm512_mul_epu32(a_hi, b_hi);
  const __m512i mid = _mm512_add_epi64(_mm512_add_epi64(_mm512_srli_epi64(ll, 32), _mm512_and_si512(lh, low32)),
                                       _mm512_and_si512(hl, low32));
  return _mm512_add_epi64(_mm512_add_epi64(hh, _mm512_srli_epi64(lh, 32)),
                          _mm512_add_epi64(_mm512_srli_epi64(hl, 32), _mm512_srli_epi64(mid, 32)));
}

// The 64-bit Shoup product of common/modarith.h (a * w mod q in [0, 2q) for any a < 2^64, w < q,
// w_shoup = floor(w 2^64 / q)), eight lanes: the vector path for primes of 2^50 .. 2^61.
FHE_IFMA __m512i mul_shoup_lazy64(__m512i a, __m512i w, __m512i w_shoup, __m512i q) {
  return _mm512_sub_epi64(_mm512_mullo_epi64(a, w), _mm512_mullo_epi64(mulhi64(a, w_shoup), q));
}

// A 104-bit sum of 52 x 52-bit products kept as two lanes: value = hi * 2^52 + lo.
struct Acc {
  __m512i lo, hi;
};

FHE_IFMA Acc acc_zero() { return Acc{_mm512_setzero_si512(), _mm512_setzero_si512()}; }

// acc += a * b for a, b < 2^52 (at most 2^11 terms before lo can overflow).
FHE_IFMA void mac(Acc& acc, __m512i a, __m512i b) {
  acc.lo = _mm512_madd52lo_epu64(acc.lo, a, b);
  acc.hi = _mm512_madd52hi_epu64(acc.hi, a, b);
}

// Constants to reduce an Acc modulo one prime p < 2^50.
struct Reducer {
  u64 p;
  u64 r52, r52_shoup;  // 2^52 mod p and its 52-bit Shoup companion
  u64 one_shoup;       // floor(2^52 / p): a Shoup product by 1, i.e. a 52-bit value mod p
};

inline Reducer make_reducer(u64 p) {
  const u64 r52 = (u64{1} << 52) % p;
  const u64 r52_shoup = static_cast<u64>((static_cast<unsigned __int128>(r52) << 52) / p);
  return Reducer{p, r52, r52_shoup, (u64{1} << 52) / p};
}

// What reduce() needs of a sum: each product a*b (a < a_max, b < b_max) adds
// floor(a*b / 2^52) <= (a_max*b_max) >> 52 to hi and less than 2^52 to lo, whose carries add at
// most `terms` more; hi + (lo >> 52) must stay below 2^52 and the prime below 2^50 (4p < 2^52).
struct SumBound {
  unsigned __int128 hi = 0;
  u64 terms = 0;
  void add(u64 a_max, u64 b_max) {
    hi += (static_cast<unsigned __int128>(a_max) * b_max) >> 52;
    ++terms;
  }
  bool fits(u64 p) const {
    return p < kIfmaMaxPrime && terms < 2048 && hi + 2 * terms < (static_cast<unsigned __int128>(1) << 52);
  }
};

// The sum held in acc, modulo p, canonical (see SumBound for the bounds).
FHE_IFMA __m512i reduce(Acc acc, const Reducer& r) {
  const __m512i p = set1(r.p);
  const __m512i hi = _mm512_add_epi64(acc.hi, _mm512_srli_epi64(acc.lo, 52));
  const __m512i lo = _mm512_and_si512(acc.lo, set1(kMask52));
  const __m512i from_hi = mul_shoup_lazy(hi, set1(r.r52), set1(r.r52_shoup), p);  // [0, 2p)
  const __m512i zero = _mm512_setzero_si512();
  const __m512i qhat = _mm512_madd52hi_epu64(zero, lo, set1(r.one_shoup));
  const __m512i from_lo = _mm512_and_si512(_mm512_sub_epi64(lo, _mm512_madd52lo_epu64(zero, qhat, p)),
                                           set1(kMask52));                          // [0, 2p)
  const __m512i sum = _mm512_add_epi64(from_hi, from_lo);                            // [0, 4p)
  return csub(csub(sum, set1(2 * r.p)), p);
}

}  // namespace ifma
#endif

}  // namespace fhe::cpu
