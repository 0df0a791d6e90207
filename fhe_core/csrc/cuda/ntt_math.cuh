// The NTT kernels' device arithmetic (cuda/ntt.cu, cuda/keyswitch.cu): the twiddle sources and the butterflies each
// kind of kernel runs with them (Harvey's, lazy, truncated-quotient, unreduced inverse, FP64), their value bounds,
// and a short Barrett reduction. No kernels and no launch logic here.
#pragma once

#include <type_traits>

#include "../common/ntt.h"
#include "launch.cuh"

namespace fhe::cuda {

constexpr int kPerThread = 8;  // elements held by a thread in every round

// Where a round finds its twiddles: the one for (stage m, group i) is w[m * base + i], Shoup
// companion ws[...]; inv/inv_shoup point at the inverse table, whose entries 0 and 1 the folded
// last butterfly needs.
struct Twiddles {
  static constexpr bool kLazy = false;  // Harvey's forward butterflies (see LazyTwiddles)
  const u64* w;
  const u64* ws;
  u32 base;  // 1 for columns, 2^k1 + row for rows
  const u64* inv;
  const u64* inv_shoup;
  __device__ __forceinline__ void load(u32 idx, u64& tw, u64& tw_shoup) const {
    tw = w[idx];
    tw_shoup = ws[idx];
  }
};

// The tuned kernels: the same twiddles from the table's interleaved (w, w') rows (common/ntt.h), one 16-byte
// load per twiddle instead of two 8-byte ones.
struct PairedTwiddles {
  static constexpr bool kLazy = false;
  const ulonglong2* pairs;
  u32 base;
  const u64* inv;
  const u64* inv_shoup;
  __device__ __forceinline__ void load(u32 idx, u64& tw, u64& tw_shoup) const {
    const ulonglong2 p = pairs[idx];
    tw = p.x;
    tw_shoup = p.y;
  }
};

// The tuned kernels: the same twiddles, forward butterflies without the reduction of x (ct_butterfly_lazy in
// common/ntt.h): every stage's values grow by less than 2q, so for a prime with (5 + 2 log N) q < 2^64
// (lazy_forward_fits) the whole forward transform needs no reduction but the output's. That drops
// about a sixth of a forward butterfly's instructions (a 64-bit compare and select, on the ALU pipe
// that ncu reports busiest). The values between the kernels are below (4 + 2 k1) q instead of 4q.
template <class Base>
struct LazyTwiddles : Base {
  static constexpr bool kLazy = true;
};

// The tuned forward columns: LazyTwiddles with the Shoup quotient truncated (mulhi_truncated): a product
// in [0, 4q) instead of [0, 2q), so each stage adds < 4q and the k1 column stages end below (4 + 4 k1) q;
// the rows kernel's lazy stages then add 2q each, to trunc_bound(log_n, k1) q, which the epilogue must allow
// for: (bound + 1) q < 2^64 (trunc_forward_fits, checked per block by both kernels alike).
template <class Base>
struct TruncatedTwiddles : Base {
  static constexpr bool kLazy = true;
  static constexpr bool kTruncated = true;
};
// The tuned inverse: no reduction between its stages (UnreducedTwiddles, for
// primes below 2^(63 - log N): unreduced_inverse_fits, checked per block by both kernels alike). Before inverse stage
// s (s stages done, both kernels counted) every value is below b_s = 2^(s+1) q: the inputs are below 2q, a sum of two
// values below b_s is below b_{s+1}, and a difference's product (x + b_s - y) w from the truncated quotient
// (mulhi_truncated) lies in [0, 4q), below b_{s+1} too. So each butterfly takes the uniform bound of its stage,
// q << (top - s0 - d) with top the local length plus the stages run before it (k2 for the rows kernel, log N for the
// columns kernel), no round ends in conditional subtractions (the lazy inverse's 7 per 8 words and round), and the
// folded last stage (inputs below 2^(log N) q, sum and difference below 2^(log N + 1) q < 2^64, exact quotients)
// gives canonical words. At N = 2^16: primes below 2^47 (N16QP1766L30D3's but q_0); larger ones run the lazy rounds.
template <class Base>
struct UnreducedTwiddles : Base {
  static constexpr bool kLazy = true;
  static constexpr bool kUnreduced = true;
  static constexpr bool kTruncated = true;
  int top;
};
// The tuned inverse's first round of the rows kernel (its two or three highest stages, whose twiddles each serve one
// row of one limb: three quarters of the kernel's twiddle bytes, 1 MB per limb with the Shoup words): w alone from the
// table's plain inverse row, 8 bytes instead of the 16-byte (w, w') pair, and w'' = w floor(2^128/q)_hi +
// hi64(w floor(2^128/q)_lo) = floor(w floor(2^128/q) / 2^64), which is w' or w' - 1 (w floor(2^128/q) / 2^64 is
// below w 2^64 / q by less than w / 2^64 < 1). With the exact quotient the product lies in [0, 3q), below every bound
// b_{s+1} >= 4q of UnreducedTwiddles.
template <class Tw>
struct ComputedShoupTwiddles : Tw {
  static constexpr bool kTruncated = false;  // (the exact quotient: [0, 3q) with w'')
  u64 ratio_hi, ratio_lo;
  __device__ __forceinline__ void load(u32 idx, u64& tw, u64& tw_shoup) const {
    tw = __ldg(this->inv + idx);
    tw_shoup = tw * ratio_hi + __umul64hi(tw, ratio_lo);
  }
};
template <class Tw, class = void>
struct IsUnreduced : std::false_type {};
template <class Tw>
struct IsUnreduced<Tw, std::void_t<decltype(Tw::kUnreduced)>> : std::bool_constant<Tw::kUnreduced> {};
template <class Tw, class = void>
struct IsTruncated : std::false_type {};
template <class Tw>
struct IsTruncated<Tw, std::void_t<decltype(Tw::kTruncated)>> : std::bool_constant<Tw::kTruncated> {};

// KernelPlan::fp64_butterflies: the forward transform's butterflies in IEEE double arithmetic, on the FP64 pipe that
// the integer kernels leave idle (8 FP64 instructions per butterfly against ~25 integer ones), for primes below 2^46
// (fp64_forward_fits; larger ones take the integer rounds), in the columns kernel and the rows kernels (ntt_rows'
// direct forward, ModDown's, and ntt_digits_inner_product's). Values are integers held in doubles, signed
// and never reduced. The product t = y w mod q (ct_butterfly_fp64), with (w, w/q) from the table's FP64 rows (w exact,
// w/q correctly rounded): hi + lo = y w exactly (hi = fl(y w), lo = fma(y, w, -hi)); k = y (w/q) rounded to an integer
// (adding and subtracting 1.5 * 2^52, exact for |y w/q| < 2^51), so |k - y w / q| <= 1/2 + |y| 2^-53; t = (hi - k q)
// + lo, where both steps are exact (integers below 2^53), and |t| <= (1/2 + |y| 2^-53) q < 5q/8 for |y| < 2^50. So a
// stage adds less than 5q/8 to a value's magnitude. Words [0, 4q) enter the columns kernel centred in (-2q, 2q]
// (in_shift) and leave it as x + (2 + k1) q (out_shift), in [0, (4 + 2 k1) q): the lazy range that the integer rows
// kernels take. The FP64 rows kernels subtract the same (2 + k1) q back, run k2 more stages (all log N: below
// (2 + 5 log N / 8) q < 13q < 2^50 at log N <= 17), and hand x + (2 + log N) q, in [0, lazy_bound(log N) q), to the
// integer epilogues (rows_store, the inner product) as the lazy integer rounds would.
// The inverse transform too, for primes below 2^41 (fp64_inverse_fits; ModUp's Q primes at N16QP1766L30D3
// but q_0, not ModDown's 46-bit P primes), Gentleman-Sande butterflies (gs_butterfly_fp64: x + y unreduced, (x - y) w
// as above). Words below 2q enter each kernel as u - q (|x| <= q), a value's bound at most doubles per stage, so after
// the rows kernel's k2 <= 9 stages every value is below 2^9 q < 2^50 (the differences multiplied too), and the columns
// kernel's folded last stage (N^-1) multiplies sums and differences below 2^(k1) q <= 2^8 q. Each kernel leaves
// canonical words (leaving: x - round(x / q) q, centred, plus q, then one conditional subtraction of q).
template <bool kInverse = false>
struct Fp64Twiddles {
  static constexpr bool kLazy = true;
  static constexpr bool kFp64 = true;
  static constexpr bool kCanonicalOut = kInverse;
  const double2* pairs;  // (w, w / q); the inverse's pairs[0], pairs[1] fold N^-1 into its last stage
  u32 base;
  double q;
  double in_shift;   // 2^52 + c q: a word u as the double 2^52 + u, minus this, is u - c q
  double out_shift;  // 2^52 + c' q: x plus this is 2^52 + the word x + c' q
  double q_inv;      // (inverse) fl(1 / q), for leaving's reduction
};
template <class Tw, class = void>
struct IsFp64 : std::false_type {};
template <class Tw>
struct IsFp64<Tw, std::void_t<decltype(Tw::kFp64)>> : std::bool_constant<Tw::kFp64> {};

constexpr double kTwoPow52 = 4503599627370496.0;
constexpr u64 kTwoPow52Bits = 0x4330000000000000ull;       // the bits of 2^52: the double 2^52 + u is these | u
constexpr double kRoundingShift = 6755399441055744.0;      // 1.5 * 2^52: x + this - this rounds x to an integer
__device__ __forceinline__ bool fp64_forward_fits(u64 q) { return q < (u64{1} << 46); }
__device__ __forceinline__ bool fp64_inverse_fits(u64 q) { return q < (u64{1} << 41); }

__device__ __forceinline__ double as_double(u64 bits) { return __longlong_as_double(static_cast<long long>(bits)); }
__device__ __forceinline__ u64 as_bits(double x) { return static_cast<u64>(__double_as_longlong(x)); }

// y w mod q in (-5q/8, 5q/8) for an integer |y| < 2^50, w = (w, w / q) (Fp64Twiddles).
__device__ __forceinline__ double mul_fp64(double y, double2 w, double q) {
  const double hi = __dmul_rn(y, w.x);
  const double lo = __fma_rn(y, w.x, -hi);
  const double k = __dsub_rn(__fma_rn(y, w.y, kRoundingShift), kRoundingShift);
  return __dadd_rn(__fma_rn(-k, q, hi), lo);
}

// x + y w, x - y w on the bit patterns of two doubles.
__device__ __forceinline__ void ct_butterfly_fp64(u64& x, u64& y, double2 w, double q) {
  const double a = as_double(x), t = mul_fp64(as_double(y), w, q);
  x = as_bits(__dadd_rn(a, t));
  y = as_bits(__dsub_rn(a, t));
}

// x + y, (x - y) w; the folded last stage: (x + y) N^-1, (x - y) psi^-brv(1) N^-1 (w = pairs[0], pairs[1]).
__device__ __forceinline__ void gs_butterfly_fp64(u64& x, u64& y, double2 w, double q) {
  const double a = as_double(x), b = as_double(y);
  x = as_bits(__dadd_rn(a, b));
  y = as_bits(mul_fp64(__dsub_rn(a, b), w, q));
}
__device__ __forceinline__ void gs_butterfly_last_fp64(u64& x, u64& y, const double2* pairs, double q) {
  const double a = as_double(x), b = as_double(y);
  x = as_bits(mul_fp64(__dadd_rn(a, b), pairs[0], q));
  y = as_bits(mul_fp64(__dsub_rn(a, b), pairs[1], q));
}

// A word entering / leaving a round from / to global memory: Fp64Twiddles' conversions, the identity otherwise.
template <class Tw>
__device__ __forceinline__ u64 entering(const Tw& t, u64 word) {
  if constexpr (IsFp64<Tw>::value) {
    const double x = __dsub_rn(__longlong_as_double(static_cast<long long>(word | kTwoPow52Bits)), t.in_shift);
    return static_cast<u64>(__double_as_longlong(x));
  } else {
    return word;
  }
}
template <class Tw>
__device__ __forceinline__ u64 leaving(const Tw& t, u64 v) {
  if constexpr (IsFp64<Tw>::value) {
    double x = as_double(v);
    if constexpr (Tw::kCanonicalOut) {  // |x| < 2^50: k = round(x / q) or one off, x - k q exact, below q
      const double k = __dsub_rn(__fma_rn(x, t.q_inv, kRoundingShift), kRoundingShift);
      x = __fma_rn(-k, t.q, x);
    }
    const u64 word = as_bits(__dadd_rn(x, t.out_shift)) & ((u64{1} << 52) - 1);
    if constexpr (Tw::kCanonicalOut) return csub(word, static_cast<u64>(t.q));
    return word;
  } else {
    return v;
  }
}
template <class Tw>
__device__ __forceinline__ void enter_registers(const Tw& t, u64 (&v)[kPerThread]) {
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) v[k] = entering(t, v[k]);
}
// The thread's 8 words of a rows kernel's last round, to the integer epilogue (FP64 values: as leaving).
template <class Tw>
__device__ __forceinline__ void leave_registers(const Tw& t, u64 (&v)[kPerThread]) {
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) v[k] = leaving(t, v[k]);
}

// floor(a b / 2^64) - e with e in {0, 1, 2}: the four 32-bit partial products but the low one, and no
// carries out of the middle ones (they sum below 3 * 2^32): one wide and two high 32-bit multiplies
// instead of the four wide ones of __umul64hi.
__device__ __forceinline__ u64 mulhi_truncated(u64 a, u64 b) {
  const u32 a0 = static_cast<u32>(a), a1 = static_cast<u32>(a >> 32);
  const u32 b0 = static_cast<u32>(b), b1 = static_cast<u32>(b >> 32);
  return static_cast<u64>(a1) * b1 + __umulhi(a0, b1) + __umulhi(a1, b0);
}

// x + w*y and x - w*y + 4q with w*y in [0, 4q) from the truncated quotient (any y < 2^64).
__device__ __forceinline__ void ct_butterfly_truncated(u64& x, u64& y, u64 w, u64 w_shoup, u64 q) {
  const u64 t = y * w - mulhi_truncated(y, w_shoup) * q;
  const u64 xr = x;
  x = xr + t;
  y = xr + 4 * q - t;
}

// Values of a forward transform from inputs below 4q stay below lazy_bound(log_n) * q with lazy butterflies.
__device__ __forceinline__ u64 lazy_bound(int log_n) { return 4 + 2 * static_cast<u64>(log_n); }
__device__ __forceinline__ bool lazy_forward_fits(u64 q, int log_n) {
  return __umul64hi(q, lazy_bound(log_n) + 1) == 0;  // (bound + 1) q < 2^64: room for the epilogue's c + bound q
}
__device__ __forceinline__ u64 trunc_bound(int log_n, int k1) { return 4 + 4 * static_cast<u64>(k1) + 2 * static_cast<u64>(log_n - k1); }
__device__ __forceinline__ bool trunc_forward_fits(u64 q, int log_n, int k1) {
  return __umul64hi(q, trunc_bound(log_n, k1) + 1) == 0;
}

// The tuned inverse for primes above UnreducedTwiddles' limit (LazyTwiddles in an inverse kernel): gs_butterfly_lazy
// inside each round of G <= 3 stages, for primes below 2^60 (a round's sums stay below 16q < 2^64; checked per
// block). Before step s
// of a round, the unit's element j (and its partner j + 2^s) is below lazy_inverse_bound(s, j) * q: 2 if
// j's low s bits are 0 ... (2 << s if they are all 0), 2 << (s - 1 - h) with h the highest set bit of those
// bits (the last step where j was a difference). The bounds fold into constants in the unrolled loops.
__host__ __device__ constexpr int highest_bit(u32 x) { return x == 0 ? -1 : 1 + highest_bit(x >> 1); }
__host__ __device__ constexpr u32 lazy_inverse_bound(int step, u32 j) {
  const u32 low = j & ((1u << step) - 1);
  return low == 0 ? 2u << step : 2u << (step - 1 - highest_bit(low));
}
__device__ __forceinline__ bool lazy_inverse_fits(u64 q) { return q < (u64{1} << 60); }
__device__ __forceinline__ bool unreduced_inverse_fits(u64 q, int log_n) { return q < (u64{1} << (63 - log_n)); }

// x, y below b -> x + y (below 2b, unreduced) and (x - y) w in [0, 4q) from the truncated quotient (UnreducedTwiddles).
__device__ __forceinline__ void gs_butterfly_truncated(u64& x, u64& y, u64 w, u64 w_shoup, u64 q, u64 b) {
  const u64 d = x + b - y;
  x = x + y;
  y = d * w - mulhi_truncated(d, w_shoup) * q;
}

// z mod q for z < 2^(2k + 1), 2^(k-1) <= q < 2^k, 3 <= k <= 61 (a product of two residues plus a few q: the tensor
// product's terms) with one 64-bit quotient where reduce128 forms a 128-bit one: x = floor(z / 2^s) < 2^(k+3) <= 2^64
// (s = k - 2) and qhat = floor(x mu / 2^64) with mu = floor(2^(62+k) / q) < 2^63 (the Barrett ratio floor(2^128 / q)
// shifted right by 66 - k). qhat <= z / q, and qhat > z/q - z/2^(k+62) - 2^s/q - 1 >= z/q - 5/2, so r = z - qhat q
// is below 3q (computed on the low words: exact) and two conditional subtractions finish. Canonical, so the same
// word as reduce128's. (tests/fhe_core/ops/test_tensor_fusion.py checks the bounds at the edges in Python.)
struct ShortBarrett {
  u64 q, mu;
  int s;
  __device__ __forceinline__ explicit ShortBarrett(const Modulus& m) : q(m.value) {
    const int k = 64 - __clzll(static_cast<long long>(q));
    const int shift = 66 - k;
    s = k - 2;
    mu = (m.ratio_lo >> shift) | (m.ratio_hi << (64 - shift));
  }
  __device__ __forceinline__ u64 reduce(U128 z) const {
    const u64 x = (z.lo >> s) | (z.hi << (64 - s));
    return reduce_4q(z.lo - __umul64hi(x, mu) * q, q);
  }
};

// The tuned store of the forward's 8 contiguous words at dst: reduced to [0, q), or through ModDown's

}  // namespace fhe::cuda
