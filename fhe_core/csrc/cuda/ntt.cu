// Batched negacyclic NTT on the GPU: two kernels per transform, each running a sub-NTT in
// shared memory.
//
// N = 2^log_n is viewed as a 2^k1 x 2^k2 matrix (k1 = log_n / 2). The first k1 forward stages
// only mix elements whose index agrees modulo T = 2^k2, i.e. the strided "columns"
// {r + c*T : c < 2^k1}; the remaining k2 stages only mix elements of a contiguous "row" of
// length 2^k2. So the forward transform is
//   ntt_columns: each block loads 8 adjacent columns (64-byte coalesced rows of the matrix)
//                and runs the first k1 stages on them;
//   ntt_rows:    each block loads whole rows and runs the last k2 stages,
// and the inverse runs the same stages in reverse order (rows first, then columns, with 1/N
// folded into the very last butterfly). Inside a block, each thread holds 8 elements in
// registers per round and does up to 3 stages on them (one radix-8 unit, two radix-4 or four
// radix-2 units), so shared memory is touched once per 3 stages.
//
// Round geometry, for stages [s0, s0 + G) of a local transform of length 2^len:
//   a unit u holds elements c(u, j) = (hi << (len - s0)) + j * 2^tl + lo,  j < 2^G,
//   with tl = len - s0 - G, lo = u mod 2^tl, hi = u >> tl;
//   in its stage s0 + d the butterfly (j, j + 2^(G-1-d)) uses the twiddle of global index
//   m * row_base + (hi << d) + (j >> (G - d)),  m = 2^(s0 + d),
// where row_base = 1 for columns and 2^k1 + row for rows (see common/ntt.h for the table).
//
// A context's plan (KernelPlan::tuned_ntt, NttPlan below) picks the reference kernels described above or
// the tuned ones, which move the rows kernel's contiguous side in 16-byte accesses, read twiddles as
// (w, w') pairs, order the grid limb-major, skip reductions in the butterflies where the prime leaves
// room (the forward below ~2^58.7, the inverse below 2^(63 - log N)), truncate the forward columns' Shoup
// quotients, compile in the row length at N = 2^16 and, with KernelPlan::fp64_butterflies, run the
// butterflies of small primes on the FP64 pipe. Both give the same words (canonical outputs).

#include <type_traits>

#include "../common/ntt.h"
#include "launch.cuh"

namespace fhe::cuda {
namespace {

constexpr int kPerThread = 8;         // elements held by a thread in every round
constexpr int kColumnsPerBlock = 8;   // 8 words = 64 bytes (two full sectors) per coalesced access
constexpr int kRowThreads = 128;      // target threads per block in ntt_rows
// Small blocks on purpose: the kernels are latency-bound (ncu on H200: ~50% issue slots busy,
// 50% occupancy at 64 registers), and more, smaller blocks per SM keep warps issuing while
// others wait at a barrier.

struct Geometry {
  int k1, k2;
};
Geometry split(int log_n) { return {log_n / 2, log_n - log_n / 2}; }

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

// Butterflies of one round on the registers v[U * 2^G] (U = 8 >> G units per thread).
template <bool kForward, int G, class Tw>
__device__ __forceinline__ void round_butterflies(u64 (&v)[kPerThread], u32 first_unit, int s0, int tl,
                                                  const Tw& t, bool fold_n_inv, u64 q) {
  constexpr int R = 1 << G;
  constexpr int U = kPerThread / R;
#pragma unroll
  for (int r = 0; r < U; ++r) {
    const u32 hi = (first_unit + r) >> tl;
    u64* x = v + r * R;
#pragma unroll
    for (int step = 0; step < G; ++step) {
      const int d = kForward ? step : G - 1 - step;
      const u32 m = 1u << (s0 + d);
      const u32 first = m * t.base + (hi << d);
      const int stride = 1 << (G - 1 - d);
#pragma unroll
      for (int j = 0; j < R; ++j) {
        if (j & stride) continue;
        const u32 idx = first + (j >> (G - d));
        if constexpr (IsFp64<Tw>::value) {
          if constexpr (kForward) ct_butterfly_fp64(x[j], x[j + stride], t.pairs[idx], t.q);
          else if (d == 0 && fold_n_inv) gs_butterfly_last_fp64(x[j], x[j + stride], t.pairs, t.q);
          else gs_butterfly_fp64(x[j], x[j + stride], t.pairs[idx], t.q);
        } else if constexpr (!kForward && IsUnreduced<Tw>::value) {
          const u64 b = q << (t.top - s0 - d);  // every value of this stage is below b (UnreducedTwiddles)
          if (d == 0 && fold_n_inv) {
            gs_butterfly_last_lazy(x[j], x[j + stride], t.inv, t.inv_shoup, q, b);
            continue;
          }
          u64 w, ws;
          t.load(idx, w, ws);
          if constexpr (IsTruncated<Tw>::value) gs_butterfly_truncated(x[j], x[j + stride], w, ws, q, b);
          else gs_butterfly_lazy(x[j], x[j + stride], w, ws, q, b);  // (ComputedShoupTwiddles: [0, 3q))
        } else if (!kForward && d == 0 && fold_n_inv) {
          if constexpr (Tw::kLazy) {
            gs_butterfly_last_lazy(x[j], x[j + stride], t.inv, t.inv_shoup, q, q * lazy_inverse_bound(step, j));
          } else {
            gs_butterfly_last(x[j], x[j + stride], t.inv, t.inv_shoup, q);
          }
        } else {
          u64 w, ws;
          t.load(idx, w, ws);
          if constexpr (kForward && IsTruncated<Tw>::value) ct_butterfly_truncated(x[j], x[j + stride], w, ws, q);
          else if constexpr (kForward && Tw::kLazy) ct_butterfly_lazy(x[j], x[j + stride], w, ws, q);
          else if (kForward) ct_butterfly(x[j], x[j + stride], w, ws, q);
          else if constexpr (Tw::kLazy) gs_butterfly_lazy(x[j], x[j + stride], w, ws, q, q * lazy_inverse_bound(step, j));
          else gs_butterfly(x[j], x[j + stride], w, ws, q);
        }
      }
    }
    if constexpr (!kForward && Tw::kLazy && !IsUnreduced<Tw>::value && !IsFp64<Tw>::value) {
      if (!fold_n_inv) {  // back below 2q (the folded round's outputs are canonical already)
#pragma unroll
        for (int j = 0; j < R; ++j) {
#pragma unroll
          for (u32 b = lazy_inverse_bound(G, j) / 2; b >= 2; b /= 2) x[j] = csub(x[j], q * b);
        }
      }
    }
  }
}

// Offsets are 32-bit (one limb holds at most 2^17 words) and linear in c on the global side, so a
// unit's addresses are base + j * step with both computed once per unit.
struct ColumnLayout {  // columns of stride T; shared tile [2^k1][8]
  u32 stride, col;
  __device__ u32 global(u32 c) const { return c * stride; }
  __device__ u32 shared(u32 c) const { return c * kColumnsPerBlock + col; }
};
struct RowLayout {  // contiguous rows; shared tile of rows, one pad word per 8 against bank conflicts
  u32 offset;
  __device__ u32 global(u32 c) const { return c; }
  __device__ u32 shared(u32 c) const {
    const u32 x = offset + c;
    return x + (x >> 3);
  }
};

template <bool kForward, int G, bool kFromGlobal, bool kToGlobal, class Layout, class Tw>
__device__ __forceinline__ void run_round(const u64* gin, u64* gout, u64* smem, const Layout& layout, u32 tcol,
                                          int s0, int len, const Tw& t, bool fold_n_inv, u64 q) {
  constexpr int R = 1 << G;
  constexpr int U = kPerThread / R;
  const int tl = len - s0 - G;
  const u32 step = 1u << tl;
  const u32 first_unit = tcol * U;
  u32 unit_base[U];  // element c(u, j) = unit_base + j * step
#pragma unroll
  for (int r = 0; r < U; ++r) {
    const u32 u = first_unit + r;
    unit_base[r] = ((u >> tl) << (len - s0)) + (u & (step - 1));
  }
  const u32 gstep = layout.global(step);
  u64 v[kPerThread];
#pragma unroll
  for (int r = 0; r < U; ++r) {
    const u32 gbase = layout.global(unit_base[r]);
#pragma unroll
    for (int j = 0; j < R; ++j)
      v[r * R + j] = kFromGlobal ? entering(t, gin[gbase + j * gstep]) : smem[layout.shared(unit_base[r] + j * step)];
  }
  round_butterflies<kForward, G>(v, first_unit, s0, tl, t, fold_n_inv, q);
#pragma unroll
  for (int r = 0; r < U; ++r) {
    const u32 gbase = layout.global(unit_base[r]);
#pragma unroll
    for (int j = 0; j < R; ++j) {
      if (kToGlobal) gout[gbase + j * gstep] = leaving(t, v[r * R + j]);
      else smem[layout.shared(unit_base[r] + j * step)] = v[r * R + j];
    }
  }
}

template <bool kForward, int G, class Layout, class Tw>
__device__ __forceinline__ void dispatch_round(bool from_global, bool to_global, const u64* gin, u64* gout,
                                               u64* smem, const Layout& layout, u32 tcol, int s0, int len,
                                               const Tw& t, bool fold, u64 q) {
  if (from_global) run_round<kForward, G, true, false>(gin, gout, smem, layout, tcol, s0, len, t, fold, q);
  else if (to_global) run_round<kForward, G, false, true>(gin, gout, smem, layout, tcol, s0, len, t, fold, q);
  else run_round<kForward, G, false, false>(gin, gout, smem, layout, tcol, s0, len, t, fold, q);
}

// All rounds of a local transform of length 2^len (len >= 5, so at least two rounds). Rounds
// cover stages [3i, 3i + 3) (the last one shorter); the inverse walks them backwards. The first
// round may read global memory and the last may write it; the rest goes through shared memory.
template <bool kForward, class Layout, class Tw>
__device__ void local_transform(bool first_from_global, bool last_to_global, const u64* gin, u64* gout,
                                u64* smem, const Layout& layout, u32 tcol, int len, const Tw& t,
                                bool fold_n_inv, u64 q) {
  const int rounds = (len + 2) / 3;
  for (int i = 0; i < rounds; ++i) {
    const int group = kForward ? i : rounds - 1 - i;
    const int s0 = 3 * group;
    const int g = min(3, len - s0);
    const bool from_global = i == 0 && first_from_global;
    const bool to_global = i == rounds - 1 && last_to_global;
    const bool fold = fold_n_inv && s0 == 0;
    if (g == 3) dispatch_round<kForward, 3>(from_global, to_global, gin, gout, smem, layout, tcol, s0, len, t, fold, q);
    else if (g == 2) dispatch_round<kForward, 2>(from_global, to_global, gin, gout, smem, layout, tcol, s0, len, t, fold, q);
    else dispatch_round<kForward, 1>(from_global, to_global, gin, gout, smem, layout, tcol, s0, len, t, fold, q);
    if (!to_global) __syncthreads();
  }
}

// The tuned kernels at N = 2^16: local_transform for a length known at compile time (both kernels do 8 stages),
// first round from and last round to global memory: the rounds unroll, so the round dispatch, the
// unit geometry (tl, step) and the stage numbers m = 2^(s0 + d) in the twiddle indices fold into
// constants.
template <bool kForward, int kLen, class Layout, class Tw>
__device__ __forceinline__ void local_transform_fixed(const u64* gin, u64* gout, u64* smem, const Layout& layout,
                                                      u32 tcol, const Tw& t, bool fold_n_inv, u64 q) {
  constexpr int rounds = (kLen + 2) / 3;
#pragma unroll
  for (int i = 0; i < rounds; ++i) {
    const int s0 = 3 * (kForward ? i : rounds - 1 - i);
    const int g = kLen - s0 < 3 ? kLen - s0 : 3;
    const bool from_global = i == 0, to_global = i == rounds - 1, fold = fold_n_inv && s0 == 0;
    if (g == 3) {
      dispatch_round<kForward, 3>(from_global, to_global, gin, gout, smem, layout, tcol, s0, kLen, t, fold, q);
    } else if (g == 2) {
      dispatch_round<kForward, 2>(from_global, to_global, gin, gout, smem, layout, tcol, s0, kLen, t, fold, q);
    } else {
      dispatch_round<kForward, 1>(from_global, to_global, gin, gout, smem, layout, tcol, s0, kLen, t, fold, q);
    }
    if (!to_global) __syncthreads();
  }
}

// ---- the tuned ntt_rows: the row's contiguous side straight from/to registers ------------
//
// In ntt_rows the forward's last round and the inverse's first one have tl = 0: a thread's units are
// its 8 consecutive words 8 * tcol .. 8 * tcol + 7 of the row. The reference kernel stages that side of the
// tile through shared memory with one word per thread and loop trip, which nvcc does not unroll: the
// inverse's load and ModDown's epilogue (c and add) then wait for one global latency per word in
// turn. The tuned kernel moves those 8 words as four 16-byte accesses per thread, all issued at once, and
// drops that staging pass and its barrier.

__device__ __forceinline__ void load8(const u64* p, u64 (&v)[kPerThread]) {
  const ulonglong2* p2 = reinterpret_cast<const ulonglong2*>(p);
#pragma unroll
  for (int k = 0; k < kPerThread / 2; ++k) {
    const ulonglong2 x = p2[k];
    v[2 * k] = x.x;
    v[2 * k + 1] = x.y;
  }
}

__device__ __forceinline__ void store8(u64* p, const u64 (&v)[kPerThread]) {
  ulonglong2* p2 = reinterpret_cast<ulonglong2*>(p);
#pragma unroll
  for (int k = 0; k < kPerThread / 2; ++k) p2[k] = make_ulonglong2(v[2 * k], v[2 * k + 1]);
}

// Butterflies of the contiguous round (the last group of stages, s0 = 3 * ((len - 1) / 3)).
template <bool kForward, class Tw>
__device__ __forceinline__ void contiguous_round(u64 (&v)[kPerThread], u32 tcol, int len, const Tw& t, u64 q) {
  const int s0 = 3 * ((len - 1) / 3);
  const int g = len - s0;
  if (g == 3) round_butterflies<kForward, 3>(v, tcol, s0, 0, t, false, q);
  else if (g == 2) round_butterflies<kForward, 2>(v, tcol * 2, s0, 0, t, false, q);
  else round_butterflies<kForward, 1>(v, tcol * 4, s0, 0, t, false, q);
}

// The thread's 8 contiguous words of its row in the shared tile.
__device__ __forceinline__ void load8_shared(const u64* smem, const RowLayout& layout, u32 tcol,
                                             u64 (&v)[kPerThread]) {
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) v[k] = smem[layout.shared(tcol * kPerThread + k)];
}

__device__ __forceinline__ void store8_shared(u64* smem, const RowLayout& layout, u32 tcol,
                                              const u64 (&v)[kPerThread]) {
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) smem[layout.shared(tcol * kPerThread + k)] = v[k];
}

template <bool kPairs>
using TwiddlesOf = std::conditional_t<kPairs, PairedTwiddles, Twiddles>;

template <bool kPairs>
__device__ __forceinline__ TwiddlesOf<kPairs> global_twiddles(const u64* table, int limb, u32 n, bool forward,
                                                              u32 base) {
  const u64* t = table + static_cast<size_t>(limb) * kNttTableRows * n;
  if constexpr (kPairs) {
    return PairedTwiddles{reinterpret_cast<const ulonglong2*>(t + (forward ? kFwdPairs : kInvPairs) * n), base,
                          t + kInv * n, t + kInvShoup * n};
  } else {
    return Twiddles{t + (forward ? kFwd : kInv) * n, t + (forward ? kFwdShoup : kInvShoup) * n, base, t + kInv * n,
                    t + kInvShoup * n};
  }
}

// Fp64Twiddles of one limb's forward table: the columns kernel's (base 1; words in as u - 2q, out as x + (2 + k1) q)
// or a rows kernel's (base 2^k1 + the row; in as u - (2 + k1) q, out as x + (2 + log N) q).
__device__ __forceinline__ Fp64Twiddles<> fp64_twiddles(const u64* table, int limb, int log_n, int k1, u64 q,
                                                        bool columns, u32 row = 0) {
  const u32 n = 1u << log_n;
  const u64* t = table + static_cast<size_t>(limb) * kNttTableRows * n;
  const double qd = static_cast<double>(q);
  const double2* pairs = reinterpret_cast<const double2*>(t + kFwdFp64 * n);
  if (columns) return {pairs, 1u, qd, kTwoPow52 + 2 * qd, kTwoPow52 + (2 + k1) * qd, 0.0};
  return {pairs, (1u << k1) + row, qd, kTwoPow52 + (2 + k1) * qd, kTwoPow52 + (2 + log_n) * qd, 0.0};
}
// The inverse's (fp64 3): words below 2q in as u - q, canonical words out (leaving); base as fp64_twiddles.
__device__ __forceinline__ Fp64Twiddles<true> fp64_inverse_twiddles(const u64* table, int limb, int log_n, int k1,
                                                                    u64 q, bool columns, u32 row = 0) {
  const u32 n = 1u << log_n;
  const u64* t = table + static_cast<size_t>(limb) * kNttTableRows * n;
  const double qd = static_cast<double>(q);
  return {reinterpret_cast<const double2*>(t + kInvFp64 * n), columns ? 1u : (1u << k1) + row, qd, kTwoPow52 + qd,
          kTwoPow52 + qd, __drcp_rn(qd)};
}

// The transform row a block works on. Order 0: grid row y is the row (batch-major). Order 1,
// limb-major: the batches' rows of one limb run next to each other. Every twiddle of
// the rows kernel (indices >= 2^k1) serves one row of one limb's transform and comes from DRAM (a
// batch's limb tables, 1 MB per limb at N = 2^16 with the Shoup words, do not stay in L2 until the
// next batch), twice the bytes of the row's data; with the batches adjacent, the second and later
// reads of a limb's twiddles hit L2 (ModUp transforms 2-3 rows per limb, ModDown 2). Order 2
// (for the second kernel of a transform): limb-major backwards, so that it starts on rows the first
// kernel wrote last, still in L2. Which kernel takes which order: NttPlan.
__device__ __forceinline__ int grid_row(int limbs, int order) {
  int y = static_cast<int>(blockIdx.y);
  if (order == 0) return y;
  if (order == 2) y = static_cast<int>(gridDim.y) - 1 - y;
  const int batches = static_cast<int>(gridDim.y) / limbs;
  return (y % batches) * limbs + y / batches;
}

// First k1 forward stages / last k1 inverse stages. Grid: (T / 8, rows). Block: 8 * 2^k1 / 8,
// at most 256 threads; 64 registers keep four blocks resident per SM.
// (columns_body: ntt_columns' body; kUnreduced: ntt_columns_inverse's.)
template <bool kForward, bool kPairs, bool kLazy, int kLen, bool kTruncated, bool kUnreduced, bool kFp64 = false>
__device__ __forceinline__ void columns_body(const u64* in, u64* out, const Modulus* __restrict__ moduli,
                                             const u64* __restrict__ table, int limbs, int log_n, int k1, NttSkip skip,
                                             int64_t in_batch_stride, int order) {
  extern __shared__ u64 smem[];
  if constexpr (kLen != 0) k1 = kLen;
  const u32 n = 1u << log_n;
  const int row = grid_row(limbs, order);
  const int limb = row % limbs;
  const u64 q = moduli[limb].value;  // (a constant table: read before the wait)
  pdl_wait();
  if (ntt_row_skipped(skip, row, limbs)) return;  // the whole block: no barrier is left waiting
  const auto t = global_twiddles<kPairs>(table, limb, n, kForward, 1u);
  const u32 col = threadIdx.x % kColumnsPerBlock;
  const u32 tcol = threadIdx.x / kColumnsPerBlock;
  const size_t column = blockIdx.x * kColumnsPerBlock + col;
  const size_t origin = static_cast<size_t>(row) * n + column;
  const int64_t in_row = in_batch_stride == 0 ? static_cast<int64_t>(row) * n
                                              : (row / limbs) * in_batch_stride + static_cast<int64_t>(limb) * n;
  const ColumnLayout layout{n >> k1, col};
  // The block's transform with twiddles (and arithmetic) tw; the inverse folds N^-1 into its last stage.
  const auto transform = [&](const auto& tw) {
    if constexpr (kLen != 0) {
      local_transform_fixed<kForward, kLen>(in + in_row + column, out + origin, smem, layout, tcol, tw, !kForward, q);
    } else {
      local_transform<kForward>(true, true, in + in_row + column, out + origin, smem, layout, tcol, k1, tw, !kForward,
                                q);
    }
  };
  if constexpr (kForward && kFp64) {
    if (fp64_forward_fits(q)) return transform(fp64_twiddles(table, limb, log_n, k1, q, true));
  }
  if constexpr (kForward && kTruncated) {
    if (trunc_forward_fits(q, log_n, k1)) return transform(TruncatedTwiddles<std::decay_t<decltype(t)>>{t});
  }
  if constexpr (kForward && kLazy) {
    if (lazy_forward_fits(q, log_n)) return transform(LazyTwiddles<std::decay_t<decltype(t)>>{t});
  }
  if constexpr (!kForward && kFp64) {  // (fp64 3: the rows kernel ran FP64 too, the same test)
    if (fp64_inverse_fits(q)) return transform(fp64_inverse_twiddles(table, limb, log_n, k1, q, true));
  }
  if constexpr (!kForward && kUnreduced) {  // (larger primes: the lazy rounds below, as the rows kernel)
    if (unreduced_inverse_fits(q, log_n)) return transform(UnreducedTwiddles<std::decay_t<decltype(t)>>{t, log_n});
  }
  if constexpr (!kForward && kLazy) {
    if (lazy_inverse_fits(q)) return transform(LazyTwiddles<std::decay_t<decltype(t)>>{t});
  }
  transform(t);
}

template <bool kForward, bool kPairs, bool kLazy = false, int kLen = 0, bool kTruncated = false, bool kFp64 = false>
__global__ void __launch_bounds__(256, 4) ntt_columns(const u64* in, u64* out, const Modulus* __restrict__ moduli,
                                                      const u64* __restrict__ table, int limbs, int log_n, int k1,
                                                      NttSkip skip, int64_t in_batch_stride, int order) {
  columns_body<kForward, kPairs, kLazy, kLen, kTruncated, false, kFp64>(in, out, moduli, table, limbs, log_n, k1, skip,
                                                                        in_batch_stride, order);
}

// The tuned inverse columns kernel: no reductions between stages for primes below 2^(63 - log N)
// (UnreducedTwiddles), the lazy rounds for larger ones.
template <int kLen, bool kFp64 = false>
__global__ void __launch_bounds__(256, 4)
    ntt_columns_inverse(const u64* in, u64* out, const Modulus* __restrict__ moduli, const u64* __restrict__ table,
                        int limbs, int log_n, int k1, NttSkip skip, int64_t in_batch_stride, int order) {
  columns_body<false, true, true, kLen, false, true, kFp64>(in, out, moduli, table, limbs, log_n, k1, skip,
                                                            in_batch_stride, order);
}

// A rotation's sigma_k(add) (kGalois): each thread's 8 output slots read 8 slots of one aligned run of 8 in the
// add row (in bit-reversed order a Galois map sends every aligned run of 2^j slots onto another one, permuted
// inside), as 8-byte loads of the same two 32-byte sectors that the 16-byte loads would touch.
// The run's 8 sources from one galois_ntt_source: first + j (first a multiple of 8) reads
// (s & ~7) | brv3((brv3(s & 7) + k brv3(j)) mod 8), s the source of first (brv3 reverses 3 bits): in the
// exponent e = k (2 brv(i) + 1) the slot's low 3 bits add k brv3(j) to the top 3 bits of (e - 1) / 2.
__device__ __forceinline__ u32 brv3(u32 x) { return __brev(x) >> 29; }
__device__ __forceinline__ void load8_galois(const u64* row, u32 first, u64 galois, int log_n, u64 (&v)[kPerThread]) {
  const u32 s = galois_ntt_source(first, galois, log_n);
  const u32 base = s & ~7u, top = brv3(s & 7u), k = static_cast<u32>(galois) & 7u;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const u32 rj = ((j & 1) << 2) | (j & 2) | ((j >> 2) & 1);  // brv3(j), a constant after unrolling
    v[j] = __ldg(row + (base | brv3((top + k * rj) & 7u)));
  }
}

// HMult's d2 = a1 b1 in the inverse rows kernel (kProducts, ops.intt_product): ModUp's inverse transforms the
// products and stores them for the digits' own rows. That kernel gets 72 registers instead of 64 (7 blocks per SM).
constexpr int rows_min_blocks(bool products) { return products ? 7 : 8; }

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
// epilogue (c - x) * P^-1 (+ add). x is below bound = 4q (Harvey) or lazy_bound(log_n) * q (lazy):
// c + bound - x < (bound + 1) q < 2^64 goes straight into the Shoup product (any 64-bit input is fine
// there), so x needs no reduction first; a lazy x is reduced by a Shoup product by 1 (w' = floor(2^64
// / q), the high word of the Barrett ratio). The result is the canonical residue either way, the same
// words as the reference kernel's.
template <bool kLazy, bool kGalois = false>
__device__ __forceinline__ void rows_store(u64 (&v)[kPerThread], u64* dst, const Modulus& m, int log_n,
                                           const NttEpilogue& epilogue, int row, int limb, u32 n, size_t offset,
                                           int limbs, u64 lazy_factor) {
  const u64 q = m.value;
  if (epilogue.sub_from == nullptr) {
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) v[k] = kLazy ? mul_shoup(v[k], 1, m.ratio_hi, q) : reduce_4q(v[k], q);
    store8(dst, v);
    return;
  }
  const int64_t batch = row / limbs;
  // offset = row * n + (word in the row); c's row (batch, limb) starts at batch * batch_stride + limb * n
  const size_t in_row = offset - static_cast<size_t>(row) * n;
  u64 c[kPerThread];
  load8(epilogue.sub_from + batch * epilogue.batch_stride + static_cast<int64_t>(limb) * n + in_row, c);
  const u64 w = epilogue.consts[limb], ws = epilogue.consts_shoup[limb];
  const u64 bound = (kLazy ? lazy_factor : 4) * q;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) v[k] = mul_shoup(c[k] + bound - v[k], w, ws, q);
  if (batch < epilogue.add_batches) {
    if constexpr (kGalois) {
      load8_galois(epilogue.add + static_cast<size_t>(row) * n, static_cast<u32>(in_row), epilogue.add_galois, log_n,
                   c);
    } else {
      load8(epilogue.add + offset, c);  // same layout as out
    }
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) v[k] = add_mod(v[k], c[k], q);
  }
  store8(dst, v);
}

// The tuned forward rows: every round but the last through shared memory (as local_transform),
// the last one's 8 contiguous words straight to global memory. (With a compile-time k2 from the
// kernel, the round loop unrolls.)
template <bool kGalois, class Tw>
__device__ __forceinline__ void rows_forward_direct(const u64* in, u64* out, u64* smem, const RowLayout& layout,
                                                    u32 tcol, int k2, const Tw& t, const Modulus& m, int log_n,
                                                    const NttEpilogue& epilogue, int row, int limb, u32 n,
                                                    size_t origin, int limbs, u64 lazy_factor) {
  const u64 q = m.value;
  const int rounds = (k2 + 2) / 3;
#pragma unroll
  for (int i = 0; i + 1 < rounds; ++i) {
    if (i == 0) run_round<true, 3, true, false>(in + origin, out + origin, smem, layout, tcol, 0, k2, t, false, q);
    else run_round<true, 3, false, false>(in + origin, out + origin, smem, layout, tcol, 3 * i, k2, t, false, q);
    __syncthreads();
  }
  u64 v[kPerThread];
  load8_shared(smem, layout, tcol, v);
  contiguous_round<true>(v, tcol, k2, t, q);
  leave_registers(t, v);
  const size_t offset = origin + tcol * kPerThread;
  rows_store<Tw::kLazy, kGalois>(v, out + offset, m, log_n, epilogue, row, limb, n, offset, limbs, lazy_factor);
}

// The tuned inverse rows: the first round's 8 contiguous words straight from global memory (in: the
// input row; with kGalois the thread's slots of sigma_k(in), also stored to the permuted row; with kProducts
// in * times, also stored), every other round through shared memory, the last one to global memory (out: the
// block's row). kComputedFirst (UnreducedTwiddles): the first round's twiddles as ComputedShoupTwiddles.
template <bool kGalois, bool kProducts, class Tw, bool kComputedFirst = false>
__device__ __forceinline__ void rows_inverse_direct(const u64* in, u64* out, u64* smem, const RowLayout& layout,
                                                    u32 tcol, int k2, u32 first, const Tw& t, u64 q, int log_n,
                                                    u64 galois, u64* permuted, const u64* times, const Modulus& m) {
  const int rounds = (k2 + 2) / 3;
  u64 v[kPerThread];
  if constexpr (kGalois) {
    load8_galois(in, first, galois, log_n, v);
    if (permuted != nullptr) store8(permuted + first, v);  // (nullptr: NttArgs::store_permuted false)
  } else if constexpr (kProducts) {  // in * times (canonical), also stored for the digits' own rows
    load8(in + first, v);
    u64 y[kPerThread];
    load8(times + first, y);
    const ShortBarrett sb(m);
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) v[k] = sb.reduce(mul_wide(v[k], y[k]));
    store8(permuted + first, v);
  } else {
    load8(in + first, v);
  }
  enter_registers(t, v);  // (FP64: the words as centred doubles)
  if constexpr (kComputedFirst) {
    contiguous_round<false>(v, tcol, k2, ComputedShoupTwiddles<Tw>{t, m.ratio_hi, m.ratio_lo}, q);
  } else {
    contiguous_round<false>(v, tcol, k2, t, q);
  }
  store8_shared(smem, layout, tcol, v);
  __syncthreads();
#pragma unroll
  for (int i = 1; i < rounds; ++i) {
    const int s0 = 3 * (rounds - 1 - i);
    if (i + 1 < rounds) {
      run_round<false, 3, false, false>(in, out, smem, layout, tcol, s0, k2, t, false, q);
      __syncthreads();
    } else {
      run_round<false, 3, false, true>(in, out, smem, layout, tcol, s0, k2, t, false, q);
    }
  }
}

// Last k2 forward stages / first k2 inverse stages on whole rows. Grid: (2^k1 / rows_per_block,
// rows). The reference kernel stages the contiguous side of each transform (the forward output, the inverse
// input) through shared memory, the tuned ones (kDirect) move it with 16-byte accesses (see load8).
// kGalois (direct only): the forward adds sigma_k(epilogue.add) (k = epilogue.add_galois), the inverse
// transforms sigma_k(in) (k = galois) and stores sigma_k(in) to `permuted` as well (a rotation's ModUp
// needs it for the digits' own rows); each thread reads its 8 slots from one aligned run of 8 (load8_galois).
// kProducts (the tuned inverse only: ntt_fuses_products): HMult's d2; the inverse transforms in * times (laid out
// like in) and stores the products to `permuted`.
// (rows_body: ntt_rows' body; kUnreduced: ntt_rows_inverse's, 1 = UnreducedTwiddles, 2 = also kComputedFirst.)
template <bool kForward, bool kDirect, bool kPairs, bool kLazy, int kLen, bool kGalois, bool kTruncated,
          bool kProducts, int kUnreduced, bool kFp64 = false>
__device__ __forceinline__ void rows_body(const u64* in, u64* out, const Modulus* __restrict__ moduli,
                                          const u64* __restrict__ table, int limbs, int log_n, int k1,
                                          int rows_per_block, NttSkip skip, NttEpilogue epilogue,
                                          int64_t in_batch_stride, int order, u64 galois, u64* permuted,
                                          const u64* times) {
  extern __shared__ u64 smem[];
  const u32 n = 1u << log_n;
  const int k2 = kLen != 0 ? kLen : log_n - k1;  // kLen: the compile-time row length at N = 2^16 (k1 = k2)
  const u32 len = 1u << k2;
  const int row = grid_row(limbs, order);
  const int limb = row % limbs;
  const u64 q = moduli[limb].value;
  pdl_wait();
  if (ntt_row_skipped(skip, row, limbs)) return;
  const u32 threads_per_row = len / kPerThread;
  const u32 sub = threadIdx.x / threads_per_row;  // row of the block
  const u32 tcol = threadIdx.x % threads_per_row;
  const u32 first_row = blockIdx.x * rows_per_block;
  const size_t tile = static_cast<size_t>(row) * n + static_cast<size_t>(first_row) * len;
  const u32 tile_len = rows_per_block * len;
  const auto t = global_twiddles<kPairs>(table, limb, n, kForward, (1u << k1) + first_row + sub);
  const RowLayout layout{sub * len};
  const size_t origin = tile + static_cast<size_t>(sub) * len;

  if (kDirect) {
    if (kForward) {
      const Modulus m = moduli[limb];
      if constexpr (kFp64) {  // (the columns kernel ran FP64 too: the same test)
        if (fp64_forward_fits(q)) {
          rows_forward_direct<kGalois>(in, out, smem, layout, tcol, k2,
                                       fp64_twiddles(table, limb, log_n, k1, q, false, first_row + sub), m, log_n,
                                       epilogue, row, limb, n, origin, limbs, lazy_bound(log_n));
          return;
        }
      }
      if constexpr (kLazy) {
        // the columns kernel's values: below trunc_bound if it ran truncated, else lazy_bound
        const bool truncated = kTruncated && trunc_forward_fits(q, log_n, k1);
        if (truncated || lazy_forward_fits(q, log_n)) {
          rows_forward_direct<kGalois>(in, out, smem, layout, tcol, k2, LazyTwiddles<std::decay_t<decltype(t)>>{t}, m,
                                       log_n, epilogue, row, limb, n, origin, limbs,
                                       truncated ? trunc_bound(log_n, k1) : lazy_bound(log_n));
          return;
        }
      }
      rows_forward_direct<kGalois>(in, out, smem, layout, tcol, k2, t, m, log_n, epilogue, row, limb, n, origin, limbs,
                                   4);
    } else {
      const int64_t in_row = in_batch_stride == 0 ? static_cast<int64_t>(row) * n
                                                  : (row / limbs) * in_batch_stride + static_cast<int64_t>(limb) * n;
      const u32 first = (first_row + sub) * len + tcol * kPerThread;  // the thread's 8 slots of the row
      u64* permuted_row = permuted == nullptr ? nullptr : permuted + static_cast<size_t>(row) * n;
      const u64* times_row = kProducts ? times + in_row : nullptr;  // (the second factor, laid out like in)
      if constexpr (kFp64) {  // (larger primes: the rounds below; the columns kernel alike)
        if (fp64_inverse_fits(q)) {
          rows_inverse_direct<kGalois, kProducts>(
              in + in_row, out + origin, smem, layout, tcol, k2, first,
              fp64_inverse_twiddles(table, limb, log_n, k1, q, false, first_row + sub), q, log_n, galois, permuted_row,
              times_row, moduli[limb]);
          return;
        }
      }
      if constexpr (kUnreduced != 0) {  // (larger primes: the lazy rounds below 2^60; the columns kernel alike)
        if (unreduced_inverse_fits(q, log_n)) {
          using Unreduced = UnreducedTwiddles<std::decay_t<decltype(t)>>;
          rows_inverse_direct<kGalois, kProducts, Unreduced, kUnreduced == 2>(
              in + in_row, out + origin, smem, layout, tcol, k2, first, Unreduced{t, k2}, q, log_n, galois,
              permuted_row, times_row, moduli[limb]);
          return;
        }
      }
      if constexpr (kLazy) {
        if (lazy_inverse_fits(q)) {
          rows_inverse_direct<kGalois, kProducts>(in + in_row, out + origin, smem, layout, tcol, k2, first,
                                                  LazyTwiddles<std::decay_t<decltype(t)>>{t}, q, log_n, galois,
                                                  permuted_row, times_row, moduli[limb]);
          return;
        }
      }
      rows_inverse_direct<kGalois, kProducts>(in + in_row, out + origin, smem, layout, tcol, k2, first, t, q, log_n,
                                              galois, permuted_row, times_row, moduli[limb]);
    }
    return;
  }
  if (!kForward) {  // coalesced load of the whole tile
    const int64_t in_row = in_batch_stride == 0 ? static_cast<int64_t>(row) * n
                                                : (row / limbs) * in_batch_stride + static_cast<int64_t>(limb) * n;
    const u64* in_tile = in + in_row + static_cast<size_t>(first_row) * len;
    for (u32 i = threadIdx.x; i < tile_len; i += blockDim.x) smem[i + (i >> 3)] = in_tile[i];
    __syncthreads();
  }
  local_transform<kForward>(kForward, !kForward, in + origin, out + origin, smem, layout, tcol, k2, t, false, q);
  if (kForward && epilogue.sub_from == nullptr) {  // coalesced store of the whole tile, reduced to [0, q)
    for (u32 i = threadIdx.x; i < tile_len; i += blockDim.x) out[tile + i] = reduce_4q(smem[i + (i >> 3)], q);
  } else if (kForward) {  // the same store through ModDown's (c - x) * P^-1
    const u64* c = epilogue.sub_from + (row / limbs) * epilogue.batch_stride + static_cast<int64_t>(limb) * n +
                   static_cast<int64_t>(first_row) * len;
    const u64 w = epilogue.consts[limb], ws = epilogue.consts_shoup[limb];
    const int64_t batch = row / limbs;
    const u64* add = batch < epilogue.add_batches ? epilogue.add + tile : nullptr;  // same layout as out
    const u64* add_row = add != nullptr ? add - static_cast<size_t>(first_row) * len : nullptr;
    for (u32 i = threadIdx.x; i < tile_len; i += blockDim.x) {
      const u64 x = reduce_4q(smem[i + (i >> 3)], q);
      const u64 y = mul_shoup(sub_mod(c[i], x, q), w, ws, q);
      const u64 a = add == nullptr            ? 0
                    : epilogue.add_galois == 1 ? add[i]
                                               : add_row[galois_ntt_source(first_row * len + i, epilogue.add_galois,
                                                                           log_n)];
      out[tile + i] = add != nullptr ? add_mod(y, a, q) : y;
    }
  }
}

// kFp64 (the forward): 7 blocks per SM (72 registers) instead of 8: at 64 the kernel, which holds the FP64 rounds and
// the 60-bit q_0's integer ones, spilled 28-48 bytes; measured 1.8 us faster in HRotate (ModDown's rows).
template <bool kForward, bool kDirect, bool kPairs, bool kLazy = false, int kLen = 0, bool kGalois = false,
          bool kTruncated = false, bool kFp64 = false>
__global__ void __launch_bounds__(kRowThreads, rows_min_blocks(false) - (kFp64 ? 1 : 0))
    ntt_rows(const u64* in, u64* out, const Modulus* __restrict__ moduli, const u64* __restrict__ table, int limbs,
             int log_n, int k1, int rows_per_block, NttSkip skip, NttEpilogue epilogue, int64_t in_batch_stride,
             int order, u64 galois, u64* permuted, const u64* times) {
  rows_body<kForward, kDirect, kPairs, kLazy, kLen, kGalois, kTruncated, false, 0, kFp64>(
      in, out, moduli, table, limbs, log_n, k1, rows_per_block, skip, epilogue, in_batch_stride, order, galois,
      permuted, times);
}

// The tuned inverse rows kernel: no reductions between stages for primes below 2^(63 - log N) (UnreducedTwiddles),
// its first round's Shoup companions computed (ComputedShoupTwiddles).
template <int kLen, bool kGalois, bool kProducts, bool kFp64 = false>
__global__ void __launch_bounds__(kRowThreads, rows_min_blocks(kProducts))
    ntt_rows_inverse(const u64* in, u64* out, const Modulus* __restrict__ moduli, const u64* __restrict__ table,
                     int limbs, int log_n, int k1, int rows_per_block, NttSkip skip, NttEpilogue epilogue,
                     int64_t in_batch_stride, int order, u64 galois, u64* permuted, const u64* times) {
  rows_body<false, true, true, true, kLen, kGalois, false, kProducts, 2, kFp64>(
      in, out, moduli, table, limbs, log_n, k1, rows_per_block, skip, epilogue, in_batch_stride, order, galois,
      permuted, times);
}

// ---- ModUp's last forward pass with the key-switching inner product (ks_fuse >= 1) ------------------
//
// A block owns limb i of QP and rows_per_block rows of the 2^k1 x 2^k2 layout. For every digit j in turn it
// runs the last k2 forward stages on digit j's rows (the columns kernel's output), or, on the digit's own
// primes (NttSkip), reads them as they are (the NTT-domain input: copied by the Conv, or straight from ModUp's
// input, NttInnerProductArgs::own, through sigma_k in a rotation), and multiplies the
// thread's 8 words into key[j][0][i] and key[j][1][i], accumulating in 128 bits; after the last digit one
// reduction and one store per component. The transformed digits never go to memory (ntt_rows' store and
// ks_inner_product_kernel's load of them), and the rows' twiddles, the same for every digit, come from L1 or
// L2 after the first digit.
//
// Bounds: a transformed word is below bound * q < 2^64 (the lazy paths: lazy_forward_fits or
// trunc_forward_fits) or 4q (Harvey's), an own word below q, a key word below q < 2^61: a product is below
// 2^125 and 8 of them fit 128 bits. With more digits each transformed word is first reduced to [0, q) (products
// below 2^122: up to 63 digits, ks_inner_product's limit). The sum is exact and its reduction canonical: the
// same words as ks_inner_product(ntt(digits)).
constexpr int kIpLazyDigits = 8;

// acc += a * b for a 128-bit sum in shared memory (16-byte aligned).
__device__ __forceinline__ void mac128_shared(ulonglong2* acc, u64 a, u64 b) {
  const ulonglong2 x = *acc;
  U128 u{x.x, x.y};
  mac128(u, a, b);
  *acc = make_ulonglong2(u.lo, u.hi);
}

// The last k2 forward stages of the thread's row (in: the row's segment of the block; every round but the last
// through shared memory, as rows_forward_direct), the thread's 8 contiguous output words left in v.
template <class Tw>
__device__ __forceinline__ void rows_forward_to_registers(const u64* in, u64* smem, const RowLayout& layout, u32 tcol,
                                                          int k2, const Tw& t, u64 q, u64 (&v)[kPerThread]) {
  const int rounds = (k2 + 2) / 3;
#pragma unroll
  for (int i = 0; i + 1 < rounds; ++i) {
    if (i == 0) run_round<true, 3, true, false>(in, nullptr, smem, layout, tcol, 0, k2, t, false, q);
    else run_round<true, 3, false, false>(in, nullptr, smem, layout, tcol, 3 * i, k2, t, false, q);
    __syncthreads();
  }
  load8_shared(smem, layout, tcol, v);
  contiguous_round<true>(v, tcol, k2, t, q);
}

// The thread's 8 words of limb's own row from NttInnerProductArgs::own (through sigma_own_galois). The addresses
// are the same for every digit: behind an opaque copy of the pointer, or nvcc computes all 8 before the digit
// loop and keeps them in registers through the transforms (spilling).
__device__ __forceinline__ void load8_own(const NttInnerProductArgs& a, int limb, u32 mine, u64 (&v)[kPerThread]) {
  const u64* own = a.own;
  u32 first = mine;
  asm volatile("" : "+l"(own), "+r"(first));
  const u64* src = own + static_cast<int64_t>(limb - a.ntt.skip.begin) * (int64_t{1} << a.ntt.log_n);
  if (a.own_galois == 1) load8(src + first, v);
  else load8_galois(src, first, a.own_galois, a.ntt.log_n, v);
}

// One block's digits in turn, then the two output components (word: the thread row's first word in a limb row).
template <int kSharedComponents, class Tw>
__device__ __forceinline__ void rows_inner_product(const NttInnerProductArgs& a, u64* smem, ulonglong2* acc_smem,
                                                   const RowLayout& layout, u32 tcol, int k2, u32 word, const Tw& t,
                                                   const Modulus& m, int limb) {
  const NttArgs& nt = a.ntt;
  const KsInnerProductArgs& ip = a.ip;
  const int64_t n = int64_t{1} << nt.log_n;
  const u64 q = m.value;
  const bool reduce_first = ip.dnum > kIpLazyDigits;
  const u32 mine = word + tcol * kPerThread;  // the thread's 8 words of the limb row
  const u64* key = ip.key + ks_key_row(limb, ip.q_count, ip.p_row) * n + mine;
  // The thread's 8 x 128-bit sums of both output components: the first kRegisterComponents in registers (64
  // registers for both: the reason for the shared variants), the others in shared memory, [component][word][thread]
  // with kRowThreads threads (every N >= 2^10 fills the block; a warp's 16-byte accesses are consecutive).
  constexpr int kRegisterComponents = 2 - kSharedComponents;
  U128 acc[kRegisterComponents > 0 ? kRegisterComponents : 1][kPerThread];
#pragma unroll
  for (int c = 0; c < 2; ++c)
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      if (c < kRegisterComponents) acc[c][k] = U128{0, 0};
      else acc_smem[((c - kRegisterComponents) * kPerThread + k) * kRowThreads] = make_ulonglong2(0, 0);
    }
  for (int j = 0; j < ip.dnum; ++j) {
    const int64_t row = static_cast<int64_t>(j) * nt.limbs + limb;
    u64 v[kPerThread];
    if (ntt_row_skipped(nt.skip, row, nt.limbs)) {  // (uniform over the block: the barriers below are safe)
      if (a.own == nullptr) load8(nt.out + row * n + mine, v);
      else load8_own(a, limb, mine, v);
    } else {
      rows_forward_to_registers(nt.out + row * n + word, smem, layout, tcol, k2, t, q, v);
      __syncthreads();  // the next digit's first round rewrites the tile
      if (reduce_first) {
#pragma unroll
        for (int k = 0; k < kPerThread; ++k) v[k] = mul_shoup(v[k], 1, m.ratio_hi, q);
      }
    }
    const u64* kj = key + static_cast<int64_t>(j) * 2 * ip.key_rows * n;
    u64 w[kPerThread];
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      load8(kj + c * ip.key_rows * n, w);
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) {
        if (c < kRegisterComponents) mac128(acc[c][k], v[k], w[k]);
        else mac128_shared(acc_smem + ((c - kRegisterComponents) * kPerThread + k) * kRowThreads, v[k], w[k]);
      }
    }
  }
#pragma unroll
  for (int c = 0; c < kRegisterComponents; ++c) {
    u64 r[kPerThread];
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) r[k] = reduce128(acc[c][k], m);
    store8(ip.out + (static_cast<int64_t>(c) * nt.limbs + limb) * n + mine, r);
  }
  // the shared sums two words at a time, not unrolled: unrolled, nvcc loads all 16 first and spills
#pragma unroll 1
  for (int i = kRegisterComponents * kPerThread; i < 2 * kPerThread; i += 2) {
    const int c = i / kPerThread, k = i % kPerThread;
    const ulonglong2 x = acc_smem[(i - kRegisterComponents * kPerThread) * kRowThreads];
    const ulonglong2 y = acc_smem[(i + 1 - kRegisterComponents * kPerThread) * kRowThreads];
    *reinterpret_cast<ulonglong2*>(ip.out + (static_cast<int64_t>(c) * nt.limbs + limb) * n + mine + k) =
        make_ulonglong2(reduce128(U128{x.x, x.y}, m), reduce128(U128{y.x, y.y}, m));
  }
}

// Grid: (2^k1 / rows_per_block, limbs), the limbs backwards (the columns kernel, batch-major, wrote the last
// limbs' rows last). Shared memory: the rows tile (tile_words), then the accumulators in shared memory.
// Blocks per SM (ptxas at N = 2^16, sm_90): 3 at 168 registers with the sums in registers, 4 at 128 with one
// component's in shared memory (25 KB per block), 5 at 96 with both (41 KB); none spills. Tighter bounds spill.
//
// Measured and removed (H200, docs/performance.md, "Issue 14, session 4"): each digit's inputs and keys copied one
// step ahead by cp.async (+29 us at the same occupancy), and each digit's transformed words staged in shared
// memory with the products after the last digit (80 registers, 6 blocks per SM: 2-5 us slower than variant 3;
// the extra warps wait on the staged words).
template <int kLen, int kSharedComponents>
__global__ void __launch_bounds__(kRowThreads, kSharedComponents == 0 ? 3 : kSharedComponents == 1 ? 4 : 5)
    ntt_rows_inner_product(NttInnerProductArgs a, int k1, int rows_per_block, bool truncated_columns, u32 tile_words) {
  extern __shared__ u64 smem[];
  const int log_n = a.ntt.log_n;
  const u32 n = 1u << log_n;
  const int k2 = kLen != 0 ? kLen : log_n - k1;
  const u32 len = 1u << k2;
  const int limb = a.ntt.limbs - 1 - static_cast<int>(blockIdx.y);
  const Modulus m = a.ntt.moduli[limb];
  const u64 q = m.value;
  const u32 threads_per_row = len / kPerThread;
  const u32 sub = threadIdx.x / threads_per_row;
  const u32 tcol = threadIdx.x % threads_per_row;
  const u32 first_row = blockIdx.x * rows_per_block;
  const auto t = global_twiddles<true>(a.ntt.table, limb, n, true, (1u << k1) + first_row + sub);
  const RowLayout layout{sub * len};
  const u32 word = (first_row + sub) * len;
  // the columns kernel's path for this prime (ntt_columns): truncated, lazy or Harvey's
  const bool truncated = truncated_columns && trunc_forward_fits(q, log_n, k1);
  ulonglong2* acc_smem = reinterpret_cast<ulonglong2*>(smem + tile_words) + threadIdx.x;
  pdl_wait();
  if (truncated || lazy_forward_fits(q, log_n)) {
    rows_inner_product<kSharedComponents>(a, smem, acc_smem, layout, tcol, k2, word,
                                          LazyTwiddles<std::decay_t<decltype(t)>>{t}, m, limb);
  } else {
    rows_inner_product<kSharedComponents>(a, smem, acc_smem, layout, tcol, k2, word, t, m, limb);
  }
}

// ---- ks_fuse 4, 5 (default): the digits in parallel inside a block ----------------------------------------------
//
// Variant 3 walks the digits one after another in every thread, its 128-bit sums live through each digit's
// transform: 128 registers, 4 warps per scheduler, and each warp alternates a long transform with a long wait on
// the key rows. Here a block holds one group of kGroupThreads threads per digit (dnum <= kMaxDigitGroups) over the
// same kGroupThreads * 8 words of limb i (rows_per_group = kGroupThreads * 8 / 2^k2 rows of the 2^k1 x 2^k2
// layout): group j runs the last k2 forward stages of digit j's rows (or reads the digit's own row as it is, as
// rows_inner_product does), multiplies its 8 words by key[j][c][i] and writes the 128-bit products to shared
// memory; after one barrier all threads of the block sum the groups' products of a word (exact: below 4 * 2^125),
// reduce once (reduce128: the canonical residue, the same word as variant 0's) and store 16 bytes per thread,
// a warp's stores contiguous. No sum lives through a transform, and while one group transforms, another one's key
// loads are in flight. kPhases 2: one component per phase (products of component 1 written after component 0's
// stores, half the shared memory: 64 registers, 5 blocks of 3 groups per SM); kPhases 1 (the default): both at
// once (80 registers, 4 blocks; one barrier and phase fewer, measured faster).
//
// Measured and removed (H200, docs/performance.md, "Issue 14, session 4, round 2"): variant 4 with the key words
// loaded before the transform (80 registers: 131 us against 109), and variant 5 without a group for the own row
// (the limbs of Q in a launch of dnum - 1 groups, the own row's products taken in the final sums, the limbs of P
// in a second launch: 119 us against 106; the P launch's 11 limbs alone took 47 us).
constexpr int kMaxDigitGroups = 4;

// Barrier of one group: named barrier 1 + group (__syncthreads is barrier 0), the id an immediate (with an id in a
// register ptxas reserves all 16 barriers).
__device__ __forceinline__ void group_barrier(int group, int threads) {
  static_assert(kMaxDigitGroups == 4, "one case per group");
  switch (group) {
    case 0: asm volatile("bar.sync 1, %0;" ::"r"(threads) : "memory"); break;
    case 1: asm volatile("bar.sync 2, %0;" ::"r"(threads) : "memory"); break;
    case 2: asm volatile("bar.sync 3, %0;" ::"r"(threads) : "memory"); break;
    default: asm volatile("bar.sync 4, %0;" ::"r"(threads) : "memory"); break;
  }
}

// rows_forward_to_registers with the group's barrier.
template <class Tw>
__device__ __forceinline__ void group_rows_forward(const u64* in, u64* smem, const RowLayout& layout, u32 tcol, int k2,
                                                   const Tw& t, u64 q, u64 (&v)[kPerThread], int group, int threads) {
  const int rounds = (k2 + 2) / 3;
#pragma unroll
  for (int i = 0; i + 1 < rounds; ++i) {
    if (i == 0) run_round<true, 3, true, false>(in, nullptr, smem, layout, tcol, 0, k2, t, false, q);
    else run_round<true, 3, false, false>(in, nullptr, smem, layout, tcol, 3 * i, k2, t, false, q);
    group_barrier(group, threads);
  }
  load8_shared(smem, layout, tcol, v);
  contiguous_round<true>(v, tcol, k2, t, q);
  leave_registers(t, v);
}

// Shared-memory slot of the 128-bit product (component cl of the phase, group thread tid, word k): [cl][tid][k]
// with k swizzled by tid, so that 8 threads writing the same k and 8 threads reading 16 consecutive words hit 8
// different 16-byte banks.
template <int kGroupThreads>
__device__ __forceinline__ u32 product_slot(int cl, u32 tid, int k) {
  return (static_cast<u32>(cl) * kGroupThreads + tid) * kPerThread + (static_cast<u32>(k) ^ (tid & 7u));
}

// tensor_fuse 2 (NttInnerProductArgs::tensor_a): HMult's tensor terms t_0 = a0 b0, t_1 = a0 b1 + a1 b0 in the own
// group's products of a limb i of Q (the group that only reads its digit's own row and then waits for the others'
// transforms). ModDown computes (x_c - Conv([x_c]_P)) * P^-1 mod q_i and Conv reads only the P rows, so adding
// (P mod q_i) * t_c to x_c's Q rows here gives (x_c - Conv) * P^-1 + t_c mod q_i: after the single reduce128 and
// ModDown's canonical store, the same words as tensor_fuse 1 (the terms added in ModDown's store). t_c mod q_i by
// ShortBarrett (t_1 < 2 q^2), times P mod q_i (< q) as a 128-bit product added to the group's product slot: the
// block's sum of a word stays below 17 q^2 < 2^127 (q < 2^61; at most kMaxDigitGroups products of a lazy word below
// 4q and a key word, plus this one).
// Reads 16 bytes per operand at a time, two pairs of words per step (unrolled fully: 32 bytes of spills in the
// kLen 0 kernel, none at kLen 8); the own thread wrote the slots, so no barrier before the read.
template <int kGroupThreads>
__device__ __forceinline__ void add_tensor_products(const NttInnerProductArgs& a, int limb, u32 mine, u32 tid,
                                                    const Modulus& m, ulonglong2* products) {
  const int64_t n = int64_t{1} << a.ntt.log_n;
  const int qi = limb - a.ntt.skip.begin;  // the limb's index in Q_l
  const int64_t plane = static_cast<int64_t>(a.ntt.limbs - a.ntt.skip.begin) * n;
  const int64_t at = qi * n + mine;
  const u64 p = a.p_mod_q[qi];
  const ShortBarrett sb(m);
  const ulonglong2* a0 = reinterpret_cast<const ulonglong2*>(a.tensor_a + at);
  const ulonglong2* a1 = reinterpret_cast<const ulonglong2*>(a.tensor_a + plane + at);
  const ulonglong2* b0 = reinterpret_cast<const ulonglong2*>(a.tensor_b + at);
  const ulonglong2* b1 = reinterpret_cast<const ulonglong2*>(a.tensor_b + plane + at);
  const auto add_term = [&](int c, int k, u64 t) {
    ulonglong2& slot = products[product_slot<kGroupThreads>(c, tid, k)];
    U128 z{slot.x, slot.y};
    mac128(z, t, p);
    slot = make_ulonglong2(z.lo, z.hi);
  };
#pragma unroll 2
  for (int k = 0; k < kPerThread; k += 2) {
    const ulonglong2 x0 = a0[k / 2], x1 = a1[k / 2], y0 = b0[k / 2], y1 = b1[k / 2];
    add_term(0, k, sb.reduce(mul_wide(x0.x, y0.x)));
    add_term(0, k + 1, sb.reduce(mul_wide(x0.y, y0.y)));
    U128 lo = mul_wide(x0.x, y1.x), hi = mul_wide(x0.y, y1.y);
    mac128(lo, x1.x, y0.x);
    mac128(hi, x1.y, y0.y);
    add_term(1, k, sb.reduce(lo));
    add_term(1, k + 1, sb.reduce(hi));
  }
}

// Grid: (2^k1 / rows_per_group, limbs), the limbs backwards (as ntt_rows_inner_product). Block: dnum groups of
// kGroupThreads. Shared memory: one region of region_words per group (its rows tile during the transform, then its
// products).
template <int kLen, int kGroupThreads, int kPhases>
__global__ void __launch_bounds__(kMaxDigitGroups * kGroupThreads, (kPhases == 2 ? 256 : 192) / kGroupThreads)
    ntt_digits_inner_product(NttInnerProductArgs a, int k1, bool truncated_columns, bool fp64_rows,
                             u32 region_words) {
  extern __shared__ u64 smem[];
  constexpr int kComponents = 2 / kPhases;  // per phase
  const NttArgs& nt = a.ntt;
  const KsInnerProductArgs& ip = a.ip;
  const int log_n = nt.log_n;
  const int64_t n = int64_t{1} << log_n;
  const int k2 = kLen != 0 ? kLen : log_n - k1;
  const u32 len = 1u << k2;
  const int limb = nt.limbs - 1 - static_cast<int>(blockIdx.y);
  const Modulus m = nt.moduli[limb];
  const u64 q = m.value;
  const int group = static_cast<int>(threadIdx.x) / kGroupThreads;  // = the digit
  const u32 tid = threadIdx.x % kGroupThreads;
  const u32 threads_per_row = len / kPerThread;
  const u32 sub = tid / threads_per_row;
  const u32 tcol = tid % threads_per_row;
  const u32 rows_per_group = kGroupThreads / threads_per_row;
  const u32 first_row = blockIdx.x * rows_per_group;
  const u32 first = first_row * len;  // the block's first word of a limb row (its rows are contiguous)
  const u32 mine = first + tid * kPerThread;
  u64* region = smem + static_cast<size_t>(group) * region_words;
  ulonglong2* products = reinterpret_cast<ulonglong2*>(region);
  const int64_t row = static_cast<int64_t>(group) * nt.limbs + limb;
  const u64* key = ip.key + (ks_key_row(limb, ip.q_count, ip.p_row) + static_cast<int64_t>(group) * 2 * ip.key_rows) * n +
                   mine;
  const int64_t key_component = ip.key_rows * n;

  u64 v[kPerThread];
  const bool own_row = ntt_row_skipped(nt.skip, row, nt.limbs);  // (uniform over the group)
  pdl_wait();
  if (own_row) {
    if (a.own == nullptr) load8(nt.out + row * n + mine, v);
    else load8_own(a, limb, mine, v);
  } else {
    const auto t = global_twiddles<true>(nt.table, limb, static_cast<u32>(n), true, (1u << k1) + first_row + sub);
    const RowLayout layout{sub * len};
    const u64* in = nt.out + row * n + first + sub * len;  // the thread's row
    const bool truncated = truncated_columns && trunc_forward_fits(q, log_n, k1);
    if (fp64_rows && fp64_forward_fits(q)) {  // (the columns kernel ran FP64 too: the same test)
      group_rows_forward(in, region, layout, tcol, k2, fp64_twiddles(nt.table, limb, log_n, k1, q, false, first_row + sub),
                         q, v, group, kGroupThreads);
    } else if (truncated || lazy_forward_fits(q, log_n)) {
      group_rows_forward(in, region, layout, tcol, k2, LazyTwiddles<std::decay_t<decltype(t)>>{t}, q, v, group,
                         kGroupThreads);
    } else {
      group_rows_forward(in, region, layout, tcol, k2, t, q, v, group, kGroupThreads);
    }
    group_barrier(group, kGroupThreads);  // the group's tile is read: its products may overwrite it
  }
  u64 w[2][kPerThread];
  load8(key, w[0]);
  load8(key + key_component, w[1]);
  const int groups = ip.dnum;
  const u32 units = kComponents * kGroupThreads * kPerThread / 2;  // 16-byte output units per phase
#pragma unroll
  for (int phase = 0; phase < kPhases; ++phase) {
#pragma unroll
    for (int cl = 0; cl < kComponents; ++cl) {
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) {
        const U128 z = mul_wide(v[k], w[phase * kComponents + cl][k]);
        products[product_slot<kGroupThreads>(cl, tid, k)] = make_ulonglong2(z.lo, z.hi);
      }
    }
    if constexpr (kPhases == 1) {  // (launch_ntt_inner_product takes tensor_a only with kPhases 1)
      if (own_row && a.tensor_a != nullptr) add_tensor_products<kGroupThreads>(a, limb, mine, tid, m, products);
    }
    __syncthreads();
    for (u32 u = threadIdx.x; u < units; u += blockDim.x) {
      const int cl = static_cast<int>(u / (kGroupThreads * kPerThread / 2));
      const u32 word = 2 * (u % (kGroupThreads * kPerThread / 2));  // of the block's words
      const u32 owner = word / kPerThread;
      const int k = static_cast<int>(word % kPerThread);
      U128 s0{0, 0}, s1{0, 0};
      for (int j = 0; j < groups; ++j) {
        const ulonglong2* pj = reinterpret_cast<const ulonglong2*>(smem + static_cast<size_t>(j) * region_words);
        const ulonglong2 x = pj[product_slot<kGroupThreads>(cl, owner, k)];
        const ulonglong2 y = pj[product_slot<kGroupThreads>(cl, owner, k + 1)];
        s0 = add128(s0, U128{x.x, x.y});
        s1 = add128(s1, U128{y.x, y.y});
      }
      const int c = phase * kComponents + cl;
      *reinterpret_cast<ulonglong2*>(ip.out + (static_cast<int64_t>(c) * nt.limbs + limb) * n + first + word) =
          make_ulonglong2(reduce128(s0, m), reduce128(s1, m));
    }
    if (phase + 1 < kPhases) __syncthreads();  // the next phase's products overwrite these
  }
}

// The tuned kernels' 16-byte accesses need every pointer they move 8 words through 16-byte aligned (torch's
// allocations are; a view with an odd word offset takes the reference kernels).
bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }
bool direct_rows_aligned(const NttArgs& a) {
  const NttEpilogue& e = a.epilogue;
  const bool epilogue_aligned = e.sub_from == nullptr || (aligned16(e.sub_from) && e.batch_stride % 2 == 0 &&
                                                          (e.add == nullptr || aligned16(e.add)));
  return aligned16(a.in) && aligned16(a.out) && a.in_batch_stride % 2 == 0 && epilogue_aligned &&
         (a.permuted == nullptr || aligned16(a.permuted)) && (a.times == nullptr || aligned16(a.times));
}

// Which kernels a transform runs: the reference ones (KernelPlan::tuned_ntt off, or inputs that the 16-byte paths
// cannot take: a view 8 bytes off alignment, a table off alignment) or the tuned ones: 16-byte row accesses, (w, w')
// twiddle pairs, the rows kernel limb-major (backwards in the forward, where it runs second) and the columns kernel
// batch-major, unreduced forward butterflies (truncated quotients in the columns), the unreduced inverse, the row
// lengths compiled in at N = 2^16, FP64 butterflies with KernelPlan::fp64_butterflies.
// Measured and removed (docs/performance.md, "Issue 14, session 3"): both kernels limb-major, twiddles prefetched
// into L2 or L1, ModDown's c and add prefetched into L2, 48/56 registers for the columns and inverse rows kernels.
struct NttPlan {
  bool tuned = false;
  int first_order = 0, second_order = 0;  // grid_row orders of the kernel run first / second
  bool fixed16 = false;                   // N = 2^16 kernels with the row length a compile-time 8
  bool fp64 = false;                      // FP64 butterflies for the primes that fit
};

NttPlan ntt_plan(const NttArgs& a, bool forward) {
  NttPlan p;
  if (!a.plan.tuned_ntt || !direct_rows_aligned(a) || !aligned16(a.table)) return p;
  p.tuned = true;
  p.first_order = forward ? 0 : 1;
  p.second_order = forward ? 2 : 0;
  p.fixed16 = a.log_n == 16;
  p.fp64 = a.plan.fp64_butterflies;
  return p;
}

using ColumnsKernel = decltype(&ntt_columns<false, false>);
using RowsKernel = decltype(&ntt_rows<false, false, false>);

// The tuned forward columns kernel (launch_ntt's and launch_ntt_inner_product's).
ColumnsKernel tuned_forward_columns(const NttPlan& plan) {
  if (plan.fixed16)
    return plan.fp64 ? ntt_columns<true, true, true, 8, true, true> : ntt_columns<true, true, true, 8, true>;
  return plan.fp64 ? ntt_columns<true, true, true, 0, true, true> : ntt_columns<true, true, true, 0, true>;
}

ColumnsKernel tuned_inverse_columns(const NttPlan& plan) {
  if (plan.fixed16) return plan.fp64 ? ntt_columns_inverse<8, true> : ntt_columns_inverse<8>;
  return plan.fp64 ? ntt_columns_inverse<0, true> : ntt_columns_inverse<0>;
}

// The tuned forward rows kernel; `galois`: it adds sigma_k(epilogue.add).
template <bool kFp64>
RowsKernel tuned_forward_rows(bool fixed16, bool galois) {
  if (fixed16) {
    return galois ? ntt_rows<true, true, true, true, 8, true, true, kFp64>
                  : ntt_rows<true, true, true, true, 8, false, true, kFp64>;
  }
  return galois ? ntt_rows<true, true, true, true, 0, true, true, kFp64>
                : ntt_rows<true, true, true, true, 0, false, true, kFp64>;
}

// The tuned inverse rows kernel; `galois`: it reads sigma_k(in); `products`: in * times.
template <bool kFp64>
RowsKernel tuned_inverse_rows(bool fixed16, bool galois, bool products) {
  if (products) return fixed16 ? ntt_rows_inverse<8, false, true, kFp64> : ntt_rows_inverse<0, false, true, kFp64>;
  if (galois) return fixed16 ? ntt_rows_inverse<8, true, false, kFp64> : ntt_rows_inverse<0, true, false, kFp64>;
  return fixed16 ? ntt_rows_inverse<8, false, false, kFp64> : ntt_rows_inverse<0, false, false, kFp64>;
}

// The launch shapes of the columns and rows kernels for `rows` rows of N = 2^log_n (launch_ntt and
// launch_ntt_inner_product share them; the rows grid's y is the caller's).
struct LaunchShape {
  Geometry g;
  dim3 col_grid;
  unsigned col_threads;
  size_t col_smem;
  u32 rows_per_block;  // rows of 2^k2 words per rows-kernel block
  unsigned row_blocks, row_threads;
  u32 tile;  // the words of one rows-kernel block (before RowLayout's padding)
};

LaunchShape launch_shape(int log_n, int rows) {
  const Geometry g = split(log_n);
  const u32 n = 1u << log_n;
  const u32 len = 1u << g.k2;
  const u32 rows_per_block = std::min<u32>(1u << g.k1, std::max<u32>(1u, kRowThreads / (len / kPerThread)));
  return LaunchShape{g,
                     dim3((n >> g.k1) / kColumnsPerBlock, static_cast<unsigned>(rows)),
                     kColumnsPerBlock * ((1u << g.k1) / kPerThread),
                     static_cast<size_t>(kColumnsPerBlock) * (1u << g.k1) * sizeof(u64),
                     rows_per_block,
                     (1u << g.k1) / rows_per_block,
                     rows_per_block * (len / kPerThread),
                     rows_per_block * len};
}

template <bool kForward>
void launch_ntt(const NttArgs& a, Stream stream) {
  if (a.rows == 0) return;
  const DeviceScope scope(stream.device);
  const LaunchShape shape = launch_shape(a.log_n, a.rows);
  const Geometry g = shape.g;
  const dim3 col_grid = shape.col_grid, row_grid(shape.row_blocks, static_cast<unsigned>(a.rows));
  const unsigned col_threads = shape.col_threads, row_threads = shape.row_threads;
  const size_t col_smem = shape.col_smem, row_smem = static_cast<size_t>(shape.tile + shape.tile / 8) * sizeof(u64);

  cudaStream_t s = native(stream);
  const int rpb = static_cast<int>(shape.rows_per_block);
  const NttPlan plan = ntt_plan(a, kForward);
  const bool galois = kForward ? a.epilogue.sub_from != nullptr && a.epilogue.add != nullptr &&
                                     a.epilogue.add_galois != 1
                               : a.galois != 1;
  const bool products = !kForward && a.times != nullptr;
  if (!kForward && galois && !plan.tuned) {  // the reference kernels: sigma_k first, into `permuted`
    automorphism_ntt(AutomorphismArgs{a.in, a.permuted, a.moduli, a.rows, a.limbs, a.log_n, a.galois}, stream);
    NttArgs plain = a;
    plain.in = a.permuted;
    plain.in_batch_stride = 0;
    plain.galois = 1;
    plain.permuted = nullptr;
    return launch_ntt<false>(plain, stream);
  }
  if (products && !plan.tuned) throw std::runtime_error("ntt: products need the tuned kernels (ops.cpp checks)");
  ColumnsKernel columns = ntt_columns<kForward, false>;
  RowsKernel rows = ntt_rows<kForward, false, false>;  // (the reference kernel takes epilogue.add_galois at run time)
  if (plan.tuned && kForward) {
    columns = tuned_forward_columns(plan);
    rows = plan.fp64 ? tuned_forward_rows<true>(plan.fixed16, galois) : tuned_forward_rows<false>(plan.fixed16, galois);
  } else if (plan.tuned) {
    columns = tuned_inverse_columns(plan);
    rows = plan.fp64 ? tuned_inverse_rows<true>(plan.fixed16, galois, products)
                     : tuned_inverse_rows<false>(plan.fixed16, galois, products);
  }
  const int first_order = plan.first_order, second_order = plan.second_order;
  if (kForward) {
    launch(columns, col_grid, col_threads, col_smem, s, "ntt_columns<forward>", a.in, a.out, a.moduli, a.table, a.limbs,
           a.log_n, g.k1, a.skip, a.in_batch_stride, first_order);
    launch(rows, row_grid, row_threads, row_smem, s, "ntt_rows<forward>", a.out, a.out, a.moduli, a.table, a.limbs,
           a.log_n, g.k1, rpb, a.skip, a.epilogue, int64_t{0}, second_order, u64{1}, static_cast<u64*>(nullptr),
           static_cast<const u64*>(nullptr));
  } else {
    launch(rows, row_grid, row_threads, row_smem, s, "ntt_rows<inverse>", a.in, a.out, a.moduli, a.table, a.limbs,
           a.log_n, g.k1, rpb, a.skip, NttEpilogue{}, a.in_batch_stride, first_order, a.galois,
           a.store_permuted ? a.permuted : nullptr, a.times);
    launch(columns, col_grid, col_threads, col_smem, s, "ntt_columns<inverse>", a.out, a.out, a.moduli, a.table,
           a.limbs, a.log_n, g.k1, a.skip, int64_t{0}, second_order);
  }
}

// ModUp's forward NTT and the inner product (NttInnerProductArgs): the columns kernel as launch_ntt's forward,
// then ntt_digits_inner_product (up to kMaxDigitGroups digits) or ntt_rows_inner_product. Where the fused kernels do
// not apply (the reference plan or a pointer off 16-byte alignment) the two ops in turn.
template <int kLen>
void launch_rows_inner_product(const NttInnerProductArgs& a, dim3 grid, unsigned threads, u32 tile_words, int k1,
                               int rows_per_block, bool truncated, cudaStream_t s) {
  const size_t smem = (tile_words + static_cast<size_t>(kPerThread) * threads * 2) * sizeof(u64);
  launch(ntt_rows_inner_product<kLen, 1>, grid, threads, smem, s, "ntt_rows_inner_product", a, k1, rows_per_block,
         truncated, tile_words);
}

// ntt_digits_inner_product: one group of kDigitGroupThreads threads per digit. False where it does not apply (more
// than kMaxDigitGroups digits, a row longer than a group's 8 words per thread): ntt_rows_inner_product runs then.
constexpr int kDigitGroupThreads = 64;

bool digits_inner_product_fits(const NttInnerProductArgs& a, int k1) {
  const int dnum = a.ip.dnum;
  const u32 threads_per_row = (1u << (a.ntt.log_n - k1)) / kPerThread;
  return dnum >= 1 && dnum <= kMaxDigitGroups && threads_per_row <= kDigitGroupThreads &&
         (1u << k1) * threads_per_row >= kDigitGroupThreads;
}

template <int kLen>
void launch_digits_inner_product(const NttInnerProductArgs& a, int k1, bool truncated, bool fp64_rows, cudaStream_t s) {
  const int dnum = a.ip.dnum;
  const int k2 = a.ntt.log_n - k1;
  const u32 threads_per_row = (1u << k2) / kPerThread;
  const u32 rows_per_group = kDigitGroupThreads / threads_per_row;
  // a group's region: its rows tile (9 words per 8: RowLayout's pad) or its products, whichever is larger
  const u32 tile_words = rows_per_group * (1u << k2) * 9 / 8;
  const u32 region_words = std::max<u32>((tile_words + 1) & ~1u, 2 * kDigitGroupThreads * kPerThread * 2);
  const size_t smem = static_cast<size_t>(dnum) * region_words * sizeof(u64);
  const auto kernel = ntt_digits_inner_product<kLen, kDigitGroupThreads, 1>;
  if (smem > 48 * 1024) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
          "cudaFuncSetAttribute(ntt_digits_inner_product)");
  }
  const dim3 grid((1u << k1) / rows_per_group, static_cast<unsigned>(a.ntt.limbs));
  launch(kernel, grid, static_cast<unsigned>(dnum * kDigitGroupThreads), smem, s, "ntt_digits_inner_product", a, k1,
         truncated, fp64_rows, region_words);
}

bool fused_inner_product_applies(const NttInnerProductArgs& a) {
  const NttArgs& nt = a.ntt;
  return ntt_plan(nt, true).tuned && aligned16(a.ip.key) && aligned16(a.ip.out) &&
         (a.own == nullptr || aligned16(a.own)) && nt.in == nt.out && a.ip.digits == nt.out &&
         nt.in_batch_stride == 0 && nt.epilogue.sub_from == nullptr &&
         std::min<u32>(1u << nt.log_n, kRowThreads * kPerThread) == kRowThreads * kPerThread;  // (full blocks)
}

// The tensor terms (NttInnerProductArgs::tensor_a) are added by ntt_digits_inner_product only.
bool tensor_terms_apply(const NttInnerProductArgs& a) {
  return fused_inner_product_applies(a) && digits_inner_product_fits(a, split(a.ntt.log_n).k1) &&
         a.ntt.skip.length > 0 && aligned16(a.tensor_a) && aligned16(a.tensor_b);
}

void launch_ntt_inner_product(const NttInnerProductArgs& a, Stream stream) {
  const NttArgs& nt = a.ntt;
  if (nt.rows == 0) return;
  if (a.tensor_a != nullptr && !tensor_terms_apply(a))  // (ops.cpp checks first: a clear error there)
    throw std::runtime_error("ntt_inner_product: tensor terms need the digit-group kernel");
  if (!fused_inner_product_applies(a)) {  // (ops.cpp has copied `own`'s rows into the digits then)
    launch_ntt<true>(nt, stream);
    ks_inner_product(a.ip, stream);
    return;
  }
  const DeviceScope scope(stream.device);
  const NttPlan plan = ntt_plan(nt, true);
  const LaunchShape shape = launch_shape(nt.log_n, nt.rows);
  const Geometry g = shape.g;
  cudaStream_t s = native(stream);
  launch(tuned_forward_columns(plan), shape.col_grid, shape.col_threads, shape.col_smem, s, "ntt_columns<forward>",
         nt.in, nt.out, nt.moduli, nt.table, nt.limbs, nt.log_n, g.k1, nt.skip, int64_t{0}, plan.first_order);
  if (digits_inner_product_fits(a, g.k1)) {
    if (plan.fixed16) launch_digits_inner_product<8>(a, g.k1, true, plan.fp64, s);
    else launch_digits_inner_product<0>(a, g.k1, true, plan.fp64, s);
    return;
  }
  const dim3 row_grid(shape.row_blocks, static_cast<unsigned>(nt.limbs));
  const u32 tile_words = (shape.tile + shape.tile / 8 + 1) & ~1u;  // (even: the sums after it are 16-byte aligned)
  const int rpb = static_cast<int>(shape.rows_per_block);
  if (plan.fixed16) launch_rows_inner_product<8>(a, row_grid, shape.row_threads, tile_words, g.k1, rpb, true, s);
  else launch_rows_inner_product<0>(a, row_grid, shape.row_threads, tile_words, g.k1, rpb, true, s);
}

}  // namespace

void ntt_forward(const NttArgs& args, Stream stream) { launch_ntt<true>(args, stream); }
bool ntt_fuses_products(const NttArgs& args) { return ntt_plan(args, false).tuned; }
void ntt_inverse(const NttArgs& args, Stream stream) { launch_ntt<false>(args, stream); }
void ntt_inner_product(const NttInnerProductArgs& args, Stream stream) { launch_ntt_inner_product(args, stream); }
bool ntt_inner_product_fuses(const NttInnerProductArgs& args) { return fused_inner_product_applies(args); }
bool ntt_inner_product_takes_tensor(const NttInnerProductArgs& args) { return tensor_terms_apply(args); }

}  // namespace fhe::cuda
