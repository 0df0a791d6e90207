// Modular arithmetic on 64-bit words for primes below 2^61, shared by the CPU and CUDA builds.
//
// Every function here is compiled for both targets from this one file, so the two builds compute
// the same residues bit for bit. Conventions:
//   * residues are canonical in [0, q) between ops; "lazy" functions say their output range;
//   * general products use Barrett reduction on the full 128-bit product with the 2-word
//     constant floor(2^128 / q);
//   * products by a constant w use Shoup's method with w' = floor(w * 2^64 / q).
// q < 2^61 leaves headroom for Harvey's lazy butterflies (values up to 4q < 2^63) and for sums
// of up to 64 products of 122 bits in a 128-bit accumulator (fast basis conversion).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FHE_HD __host__ __device__ __forceinline__
#else
#define FHE_HD inline
#endif

namespace fhe {

using u32 = uint32_t;
using u64 = uint64_t;

constexpr int kMaxModulusBits = 61;

// Per-prime constants, laid out as one row [4] of an int64 "moduli" tensor [l, 4].
struct Modulus {
  u64 value;     // q, an odd prime < 2^61
  u64 ratio_hi;  // floor(2^128 / q), high word
  u64 ratio_lo;  // floor(2^128 / q), low word
  u64 bits;      // bit length of q (informational)
};
static_assert(sizeof(Modulus) == 4 * sizeof(u64), "Modulus must match a [4] int64 row");

struct U128 {
  u64 lo, hi;
};

FHE_HD u64 mulhi64(u64 a, u64 b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  return static_cast<u64>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

FHE_HD U128 mul_wide(u64 a, u64 b) { return U128{a * b, mulhi64(a, b)}; }

FHE_HD U128 add128(U128 x, U128 y) {
  const u64 lo = x.lo + y.lo;
  return U128{lo, x.hi + y.hi + (lo < x.lo ? 1u : 0u)};
}

// acc += a * b over 128 bits. On the GPU, PTX's multiply-add with carry does it in two
// instructions (mad.lo.cc / madc.hi); the compare-based add128(mul_wide(...)) costs several times
// more. Callers keep the sum below 2^128 (at most 64 products of two words below 2^61).
FHE_HD void mac128(U128& acc, u64 a, u64 b) {
#if defined(__CUDA_ARCH__)
  asm("mad.lo.cc.u64 %0, %2, %3, %0;\n\tmadc.hi.u64 %1, %2, %3, %1;"
      : "+l"(acc.lo), "+l"(acc.hi)
      : "l"(a), "l"(b));
#else
  const unsigned __int128 sum =
      ((static_cast<unsigned __int128>(acc.hi) << 64) | acc.lo) + static_cast<unsigned __int128>(a) * b;
  acc.lo = static_cast<u64>(sum);
  acc.hi = static_cast<u64>(sum >> 64);
#endif
}

// r in [0, k*q) -> r mod q for k <= 2, branch-free select.
FHE_HD u64 csub(u64 r, u64 q) { return r >= q ? r - q : r; }

// Barrett reduction of any 128-bit z modulo q < 2^62.
//
// With ratio r = floor(2^128/q), the estimate qhat = floor(z*r / 2^128) computed without the
// low word of z0*r0 lies in [floor(z/q) - 2, floor(z/q)], so z - qhat*q is in [0, 3q) and two
// conditional subtractions finish. Only the low 64 bits of qhat matter: the remainder fits in
// one word, so it is exact modulo 2^64.
FHE_HD u64 reduce128(U128 z, const Modulus& m) {
  const u64 c0 = mulhi64(z.lo, m.ratio_lo);
  const U128 t = add128(mul_wide(z.lo, m.ratio_hi), U128{c0, 0});
  const U128 u = add128(mul_wide(z.hi, m.ratio_lo), U128{t.lo, 0});
  const u64 qhat = z.hi * m.ratio_hi + t.hi + u.hi;
  u64 r = z.lo - qhat * m.value;
  r = csub(r, 2 * m.value);
  return csub(r, m.value);
}

FHE_HD u64 mul_mod(u64 a, u64 b, const Modulus& m) { return reduce128(mul_wide(a, b), m); }

FHE_HD u64 add_mod(u64 a, u64 b, u64 q) { return csub(a + b, q); }

FHE_HD u64 sub_mod(u64 a, u64 b, u64 q) { return a >= b ? a - b : a + q - b; }

FHE_HD u64 neg_mod(u64 a, u64 q) { return a == 0 ? 0 : q - a; }

// a*b + c mod q, for canonical a, b, c.
FHE_HD u64 mul_add_mod(u64 a, u64 b, u64 c, const Modulus& m) {
  return reduce128(add128(mul_wide(a, b), U128{c, 0}), m);
}

// Shoup: a*w mod q in [0, 2q) for any a < 2^64 and w < q, with w_shoup = floor(w*2^64/q).
FHE_HD u64 mul_shoup_lazy(u64 a, u64 w, u64 w_shoup, u64 q) {
  return a * w - mulhi64(a, w_shoup) * q;
}

FHE_HD u64 mul_shoup(u64 a, u64 w, u64 w_shoup, u64 q) {
  return csub(mul_shoup_lazy(a, w, w_shoup, q), q);
}

// Signed small integer (|v| < q) to its residue.
FHE_HD u64 from_signed(int64_t v, u64 q) {
  return v >= 0 ? static_cast<u64>(v) : q - static_cast<u64>(-v);
}

// ---- host-only precomputation ---------------------------------------------------------------
#if !defined(__CUDA_ARCH__)
inline u64 shoup_precompute(u64 w, u64 q) {
  return static_cast<u64>((static_cast<unsigned __int128>(w) << 64) / q);
}

inline Modulus make_modulus(u64 q) {
  // floor(2^128 / q) == floor((2^128 - 1) / q) because an odd q > 1 never divides 2^128.
  const unsigned __int128 ratio = ~static_cast<unsigned __int128>(0) / q;
  u64 bits = 0;
  for (u64 v = q; v != 0; v >>= 1) ++bits;
  return Modulus{q, static_cast<u64>(ratio >> 64), static_cast<u64>(ratio), bits};
}

inline u64 pow_mod(u64 base, u64 exp, const Modulus& m) {
  u64 result = 1 % m.value;
  base %= m.value;
  while (exp != 0) {
    if (exp & 1) result = mul_mod(result, base, m);
    base = mul_mod(base, base, m);
    exp >>= 1;
  }
  return result;
}
#endif

}  // namespace fhe
