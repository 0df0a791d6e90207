// The tensor-core Conv's device helpers (cuda/rns.cu explains the method), shared by rns.cu's Conv
// kernels and ntt.cu's fused ModDown columns kernel (mod_down_columns).
#pragma once

#include "../common/modarith.h"

namespace fhe::cuda {

__device__ __forceinline__ void mma_u8(int (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();  // never launched there (has_integer_mma): fail loudly rather than return zeros
#endif
}

// V mod q for V < 2^80 and q > 2^16: Barrett with mu = floor(2^80 / q) = floor(ratio / 2^48) on
// top = floor(V / 2^16). qhat = floor(top * mu / 2^64) is at most floor(V / q) and falls short of it
// by less than 3 (one each from mu's and top's truncation and the product's floor, each < 1), so
// V - qhat q lies in [0, 3q): half the work of reduce128 for the tensor-core Conv's sums.
__device__ __forceinline__ u64 reduce80(U128 v, const Modulus& m) {
  if ((m.ratio_hi >> 48) != 0) return reduce128(v, m);  // q < 2^16: mu would not fit a word
  const u64 mu = (m.ratio_hi << 16) | (m.ratio_lo >> 48);
  const u64 top = (v.hi << 48) | (v.lo >> 16);
  const u64 r = v.lo - __umul64hi(top, mu) * m.value;
  return csub(csub(r, 2 * m.value), m.value);
}

// The A fragments of a warp's two 16-coefficient halves from the staged y_k (ys32: the [slots][kStride]
// words as 32-bit halves, coefficients first .. first + 31): lane (g, t) holds, per K tile, the low or high half (t & 1) of y for slots
// 4 kt + t / 2 and + 2, coefficients cb and cb + 8 (the m16n8k32 row-major A layout).
template <int KT, int kStride>
__device__ __forceinline__ void load_a_fragments(const u32* ys32, int first, int g, int t, u32 (&af)[2][KT][4]) {
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    const int cb = first + 16 * m + g;
#pragma unroll
    for (int kt = 0; kt < KT; ++kt) {
      const int k0 = 4 * kt + (t >> 1), k1 = k0 + 2;
      af[m][kt][0] = ys32[(k0 * kStride + cb) * 2 + (t & 1)];
      af[m][kt][1] = ys32[(k0 * kStride + cb + 8) * 2 + (t & 1)];
      af[m][kt][2] = ys32[(k1 * kStride + cb) * 2 + (t & 1)];
      af[m][kt][3] = ys32[(k1 * kStride + cb + 8) * 2 + (t & 1)];
    }
  }
}

struct alignas(16) MmaRow {
  u64 q;
  u64 fold;    // 2^50 mod q
  u32 mu;      // floor(2^(32 + s) / q) for s = bit length of q - 1 >= 32 (then 2^31 <= mu < 2^32); 0: q < 2^32
  u32 shift;   // s - 32
  u32 offset;  // output row * N (< 2^32: rows * N words of one digit)
  u32 pad;
};

// The row constants of output prime m at output row offset `offset` (row * N).
__device__ __forceinline__ MmaRow mma_row(const Modulus& m, u32 offset) {
  const int s = 63 - __clzll(static_cast<long long>(m.value));
  if (s < 32) return MmaRow{m.value, 0, 0, 0, offset, 0};
  // floor(2^(32 + s) / q) = floor(floor(2^128 / q) / 2^(96 - s)), 96 - s in [36, 64]
  const u64 mu = s == 32 ? m.ratio_hi : (m.ratio_hi << (s - 32)) | (m.ratio_lo >> (96 - s));
  // (A 64-bit remainder here, once per row and block: computing it inline from the ratio instead changed the
  // kernel's register allocation at 64 registers and spilled 16-28 bytes in the tile loop, 3-9% slower.)
  const u64 fold = (u64{1} << 50) % m.value;
  return MmaRow{m.value, fold, static_cast<u32>(mu), static_cast<u32>(s - 32), offset, 0};
}

// V = P0 + 2^16 P1 + 2^32 P2 + 2^48 P3 mod q (P_t = T_2t + 2^8 T_2t+1, so V = sum_b 2^(8b) T_b < 2^80), for
// q >= 2^32 (mu != 0):
// first W = (V mod 2^50) + floor(V / 2^50) (2^50 mod q) = V (mod q), W < 2^50 + 2^30 q; then Barrett
// with a 32-bit quotient: top = floor(W / 2^s) < 2^18 + 2^31 (2^s < q < 2^(s+1), s >= 32) and
// qhat = floor(top mu / 2^32). qhat <= W / q, and top mu / 2^32 > (W / 2^s - 1)(2^(32+s) / q - 1) / 2^32
// > W / q - W / 2^(32+s) - 2^s / q > W / q - 1.51, so r = W - qhat q lies in [0, 3q) (computed modulo 2^64,
// where it fits). Lazy: r as it is; else two conditional subtractions. q < 2^32: reduce80 (canonical).
template <bool kLazy>
__device__ __forceinline__ u64 reduce_quad_sums(uint4 p, const MmaRow& row, const Modulus* dst, int64_t n) {
  const u64 low = p.x + (static_cast<u64>(p.y) << 16);   // < 2^49
  const u64 high = p.z + (static_cast<u64>(p.w) << 16);  // < 2^49
  const u64 above = (low >> 32) + high;                  // floor(V / 2^32) < 2^48
  if (row.mu == 0) return reduce80(U128{(low & 0xffffffffu) | (above << 32), above >> 32}, dst[row.offset / n]);
  const u32 h = static_cast<u32>(above >> 18);           // floor(V / 2^50) < 2^30
  const u64 v50 = (low & 0xffffffffu) | ((above & 0x3ffff) << 32);
  const u64 w_low = static_cast<u64>(h) * static_cast<u32>(row.fold) + v50;  // < 2^62 + 2^50
  const u64 w_high = (w_low >> 32) + static_cast<u64>(h) * static_cast<u32>(row.fold >> 32);  // floor(W / 2^32)
  const u32 top = static_cast<u32>(w_high >> row.shift);
  const u32 qhat = __umulhi(top, row.mu);
  const u64 r = ((w_low & 0xffffffffu) | (w_high << 32)) - static_cast<u64>(qhat) * row.q;
  return kLazy ? r : csub(csub(r, 2 * row.q), row.q);
}

}  // namespace fhe::cuda
