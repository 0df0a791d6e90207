// Negacyclic NTT building blocks shared by the CPU and CUDA builds.
//
// Convention (one fixed evaluation order used by every op):
//   forward NTT: Cooley-Tukey, natural-order input, bit-reversed output, psi-twist merged;
//     stage m (m = 1, 2, ..., N/2; half-size t = N/(2m)) pairs (j, j+t) inside group i with the
//     twiddle W = table_fwd[m + i] = psi^brv(m + i), where psi is a primitive 2N-th root of
//     unity and brv reverses log2(N) bits. Output slot k holds a(psi^(2*brv(k)+1)).
//   inverse NTT: Gentleman-Sande, the exact reverse of each stage, with table_inv[m + i] =
//     psi^-brv(m + i). The final 1/N is folded into the last stage (m = 1), which is why the
//     inverse table stores N^-1 at index 0 (unused as a twiddle) and psi^-brv(1) * N^-1 at 1.
//
// Butterflies are Harvey's lazy ones: forward values live in [0, 4q), inverse values in [0, 2q).
#pragma once

#include <cstring>

#include "modarith.h"

namespace fhe {

// Table rows of the int64 tensor [l, R, N] built once per (prime, N, device): the twiddles and their
// Shoup companions in separate rows (0-3, what the CPU kernels read; a CPU table has only these, R = 4),
// then, in a CUDA table (R = 12), the same words interleaved as (w, w') pairs over two rows each (4-5
// forward, 6-7 inverse: pair i at words 2i, 2i + 1), which the CUDA kernels read with one 16-byte load
// per twiddle, and the pairs (w, w / q) as IEEE doubles (8-9 forward, 10-11 inverse; store_fp64_pair) for the
// FP64 butterflies (cuda/ntt_math.cuh, Fp64Twiddles). Kernels take R from the table (NttArgs::table_rows).
enum NttTableRow : int {
  kFwd = 0,
  kFwdShoup = 1,
  kInv = 2,
  kInvShoup = 3,
  kNttTableRowsCpu = 4,
  kFwdPairs = 4,
  kInvPairs = 6,
  kFwdFp64 = 8,
  kInvFp64 = 10,
  kNttTableRows = 12
};

#if !defined(__CUDA_ARCH__)
// The FP64 pair of twiddle w mod q: w and w / q as doubles, each correctly rounded (w < q < 2^53 converts
// exactly; IEEE division rounds once), stored as their bit patterns.
inline void store_fp64_pair(u64* out, u64 w, u64 q) {
  const double pair[2] = {static_cast<double>(w), static_cast<double>(w) / static_cast<double>(q)};
  std::memcpy(out, pair, sizeof(pair));
}
#endif

FHE_HD u32 bit_reverse(u32 x, int bits) {
#if defined(__CUDA_ARCH__)
  return bits == 0 ? 0u : __brev(x) >> (32 - bits);
#else
  u32 r = 0;
  for (int i = 0; i < bits; ++i) {
    r = (r << 1) | (x & 1u);
    x >>= 1;
  }
  return r;
#endif
}

// x, y in [0, 4q) -> x + w*y, x - w*y, both in [0, 4q).
FHE_HD void ct_butterfly(u64& x, u64& y, u64 w, u64 w_shoup, u64 q) {
  const u64 two_q = 2 * q;
  const u64 xr = csub(x, two_q);
  const u64 t = mul_shoup_lazy(y, w, w_shoup, q);
  x = xr + t;
  y = xr + two_q - t;
}

// The forward butterfly without Harvey's reduction of x: x + w*y and x - w*y + 2q, each below x + 2q
// (w*y comes out of the Shoup product in [0, 2q) for any y < 2^64). A transform of log N such
// stages from inputs below 4q stays below (4 + 2 log N) q: for primes with (5 + 2 log N) q < 2^64
// (about 2^58.7 at N = 2^17) no stage needs a reduction, only the output (CUDA "lazy forward").
FHE_HD void ct_butterfly_lazy(u64& x, u64& y, u64 w, u64 w_shoup, u64 q) {
  const u64 t = mul_shoup_lazy(y, w, w_shoup, q);
  const u64 xr = x;
  x = xr + t;
  y = xr + 2 * q - t;
}

// x, y in [0, 2q) -> x + y, (x - y)*w, both in [0, 2q).
FHE_HD void gs_butterfly(u64& x, u64& y, u64 w, u64 w_shoup, u64 q) {
  const u64 two_q = 2 * q;
  const u64 s = csub(x + y, two_q);
  const u64 d = x + two_q - y;
  x = s;
  y = mul_shoup_lazy(d, w, w_shoup, q);
}

// The last inverse stage (m = 1) with N^-1 folded in; outputs canonical in [0, q).
// inv[0] = N^-1, inv[1] = psi^-brv(1) * N^-1 (see the table convention above).
FHE_HD void gs_butterfly_last(u64& x, u64& y, const u64* inv, const u64* inv_shoup, u64 q) {
  const u64 two_q = 2 * q;
  const u64 s = x + y;           // < 4q: fine for Shoup
  const u64 d = x + two_q - y;   // < 4q
  x = mul_shoup(s, inv[0], inv_shoup[0], q);
  y = mul_shoup(d, inv[1], inv_shoup[1], q);
}

// The inverse butterflies without the reduction of the sum (CUDA ntt variant 5): x, y below b (a power of
// two times q with 2b <= 2^64) -> x + y below 2b, unreduced, and (x - y) w in [0, 2q). Over a group of G
// stages the sums double per stage (an element's bound is 2q times 2 per stage since it last was a
// difference), so a group from inputs below 2q ends below 2^(G+1) q and is reduced once, element by element.
FHE_HD void gs_butterfly_lazy(u64& x, u64& y, u64 w, u64 w_shoup, u64 q, u64 b) {
  const u64 d = x + b - y;
  x = x + y;
  y = mul_shoup_lazy(d, w, w_shoup, q);
}

// gs_butterfly_last for x, y below b (as gs_butterfly_lazy): the Shoup products take any 64-bit input.
FHE_HD void gs_butterfly_last_lazy(u64& x, u64& y, const u64* inv, const u64* inv_shoup, u64 q, u64 b) {
  const u64 s = x + y;
  const u64 d = x + b - y;
  x = mul_shoup(s, inv[0], inv_shoup[0], q);
  y = mul_shoup(d, inv[1], inv_shoup[1], q);
}

// [0, 4q) -> [0, q)
FHE_HD u64 reduce_4q(u64 x, u64 q) { return csub(csub(x, 2 * q), q); }

// NTT-domain automorphism X -> X^k: output slot i reads input slot galois_ntt_source(i).
// Slot i evaluates at psi^(2*brv(i)+1); sigma_k(a) there equals a at psi^(k*(2*brv(i)+1)).
FHE_HD u32 galois_ntt_source(u32 i, u64 k, int log_n) {
  const u64 two_n_mask = (u64{2} << log_n) - 1;
  const u64 e = (k * (2 * static_cast<u64>(bit_reverse(i, log_n)) + 1)) & two_n_mask;
  return bit_reverse(static_cast<u32>((e - 1) >> 1), log_n);
}

}  // namespace fhe
