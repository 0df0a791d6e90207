// The NTT kernels' building blocks (cuda/ntt.cu, cuda/keyswitch.cu): the round geometry and butterfly rounds of a
// local transform in shared memory (see cuda/ntt.cu for the 2^k1 x 2^k2 decomposition), the 16-byte row accesses of
// the tuned kernels, and where a block finds its row and its twiddles.
#pragma once

#include "ntt_math.cuh"

namespace fhe::cuda {

constexpr int kColumnsPerBlock = 8;  // 8 words = 64 bytes (two full sectors) per coalesced access

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

// ---- the tuned rows kernels: the row's contiguous side straight from/to registers ------------
//
// In a rows kernel the forward's last round and the inverse's first one have tl = 0: a thread's units are its 8
// consecutive words of the row. The reference kernel stages that side of the tile through shared memory, one word
// per thread and loop trip; the tuned kernels move those 8 words as four 16-byte accesses per thread, all issued at
// once, without that staging pass and its barrier.

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

// A rotation's sigma_k (kGalois): each thread's 8 output slots read 8 slots of one aligned run of 8 in the
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


// The last k2 forward stages of the thread's row (in: the row's segment of the block): every round but the last
// through shared memory (`barrier` after each), the thread's 8 contiguous output words left in v as the integer
// epilogues take them.
template <class Tw, class Barrier>
__device__ __forceinline__ void rows_forward_to_registers(const u64* in, u64* smem, const RowLayout& layout, u32 tcol,
                                                          int k2, const Tw& t, u64 q, u64 (&v)[kPerThread],
                                                          Barrier barrier) {
  const int rounds = (k2 + 2) / 3;
#pragma unroll
  for (int i = 0; i + 1 < rounds; ++i) {
    if (i == 0) run_round<true, 3, true, false>(in, nullptr, smem, layout, tcol, 0, k2, t, false, q);
    else run_round<true, 3, false, false>(in, nullptr, smem, layout, tcol, 3 * i, k2, t, false, q);
    barrier();
  }
  load8_shared(smem, layout, tcol, v);
  contiguous_round<true>(v, tcol, k2, t, q);
  leave_registers(t, v);
}

}  // namespace fhe::cuda
