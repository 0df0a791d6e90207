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
  const u64* w;
  const u64* ws;
  u32 base;  // 1 for columns, 2^k1 + row for rows
  const u64* inv;
  const u64* inv_shoup;
};

// Butterflies of one round on the registers v[U * 2^G] (U = 8 >> G units per thread).
template <bool kForward, int G>
__device__ __forceinline__ void round_butterflies(u64 (&v)[kPerThread], u32 first_unit, int s0, int tl,
                                                  const Twiddles& t, bool fold_n_inv, u64 q) {
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
        if (kForward) ct_butterfly(x[j], x[j + stride], t.w[idx], t.ws[idx], q);
        else if (d == 0 && fold_n_inv) gs_butterfly_last(x[j], x[j + stride], t.inv, t.inv_shoup, q);
        else gs_butterfly(x[j], x[j + stride], t.w[idx], t.ws[idx], q);
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

template <bool kForward, int G, bool kFromGlobal, bool kToGlobal, class Layout>
__device__ __forceinline__ void run_round(const u64* gin, u64* gout, u64* smem, const Layout& layout, u32 tcol,
                                          int s0, int len, const Twiddles& t, bool fold_n_inv, u64 q) {
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
      v[r * R + j] = kFromGlobal ? gin[gbase + j * gstep] : smem[layout.shared(unit_base[r] + j * step)];
  }
  round_butterflies<kForward, G>(v, first_unit, s0, tl, t, fold_n_inv, q);
#pragma unroll
  for (int r = 0; r < U; ++r) {
    const u32 gbase = layout.global(unit_base[r]);
#pragma unroll
    for (int j = 0; j < R; ++j) {
      if (kToGlobal) gout[gbase + j * gstep] = v[r * R + j];
      else smem[layout.shared(unit_base[r] + j * step)] = v[r * R + j];
    }
  }
}

template <bool kForward, int G, class Layout>
__device__ __forceinline__ void dispatch_round(bool from_global, bool to_global, const u64* gin, u64* gout,
                                               u64* smem, const Layout& layout, u32 tcol, int s0, int len,
                                               const Twiddles& t, bool fold, u64 q) {
  if (from_global) run_round<kForward, G, true, false>(gin, gout, smem, layout, tcol, s0, len, t, fold, q);
  else if (to_global) run_round<kForward, G, false, true>(gin, gout, smem, layout, tcol, s0, len, t, fold, q);
  else run_round<kForward, G, false, false>(gin, gout, smem, layout, tcol, s0, len, t, fold, q);
}

// All rounds of a local transform of length 2^len (len >= 5, so at least two rounds). Rounds
// cover stages [3i, 3i + 3) (the last one shorter); the inverse walks them backwards. The first
// round may read global memory and the last may write it; the rest goes through shared memory.
template <bool kForward, class Layout>
__device__ void local_transform(bool first_from_global, bool last_to_global, const u64* gin, u64* gout,
                                u64* smem, const Layout& layout, u32 tcol, int len, const Twiddles& t,
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

__device__ __forceinline__ Twiddles global_twiddles(const u64* table, int limb, u32 n, bool forward, u32 base) {
  const u64* t = table + static_cast<size_t>(limb) * kNttTableRows * n;
  return Twiddles{t + (forward ? kFwd : kInv) * n, t + (forward ? kFwdShoup : kInvShoup) * n, base, t + kInv * n,
                  t + kInvShoup * n};
}

// First k1 forward stages / last k1 inverse stages. Grid: (T / 8, rows). Block: 8 * 2^k1 / 8,
// at most 256 threads; 64 registers keep four blocks resident per SM.
template <bool kForward>
__global__ void __launch_bounds__(256, 4) ntt_columns(const u64* in, u64* out, const Modulus* __restrict__ moduli,
                                                      const u64* __restrict__ table, int limbs, int log_n, int k1,
                                                      NttSkip skip, int64_t in_batch_stride) {
  extern __shared__ u64 smem[];
  const u32 n = 1u << log_n;
  const int row = blockIdx.y;
  if (ntt_row_skipped(skip, row, limbs)) return;  // the whole block: no barrier is left waiting
  const int limb = row % limbs;
  const u64 q = moduli[limb].value;
  const Twiddles t = global_twiddles(table, limb, n, kForward, 1u);
  const u32 col = threadIdx.x % kColumnsPerBlock;
  const u32 tcol = threadIdx.x / kColumnsPerBlock;
  const size_t column = blockIdx.x * kColumnsPerBlock + col;
  const size_t origin = static_cast<size_t>(row) * n + column;
  const int64_t in_row = in_batch_stride == 0 ? static_cast<int64_t>(row) * n
                                              : (row / limbs) * in_batch_stride + static_cast<int64_t>(limb) * n;
  const ColumnLayout layout{n >> k1, col};
  local_transform<kForward>(true, true, in + in_row + column, out + origin, smem, layout, tcol, k1, t,
                                    !kForward, q);
}

// Last k2 forward stages / first k2 inverse stages on whole rows. Grid: (2^k1 / rows_per_block,
// rows). The strided side of each transform (the forward output, the inverse input) goes through
// shared memory so that global accesses stay coalesced.
template <bool kForward>
__global__ void __launch_bounds__(kRowThreads, 8) ntt_rows(const u64* in, u64* out, const Modulus* __restrict__ moduli,
                                                           const u64* __restrict__ table, int limbs, int log_n,
                                                           int k1, int rows_per_block, NttSkip skip,
                                                           NttEpilogue epilogue, int64_t in_batch_stride) {
  extern __shared__ u64 smem[];
  const u32 n = 1u << log_n;
  const int k2 = log_n - k1;
  const u32 len = 1u << k2;
  const int row = blockIdx.y;
  if (ntt_row_skipped(skip, row, limbs)) return;
  const int limb = row % limbs;
  const u64 q = moduli[limb].value;
  const u32 threads_per_row = len / kPerThread;
  const u32 sub = threadIdx.x / threads_per_row;  // row of the block
  const u32 tcol = threadIdx.x % threads_per_row;
  const u32 first_row = blockIdx.x * rows_per_block;
  const size_t tile = static_cast<size_t>(row) * n + static_cast<size_t>(first_row) * len;
  const u32 tile_len = rows_per_block * len;
  const Twiddles t = global_twiddles(table, limb, n, kForward, (1u << k1) + first_row + sub);
  const RowLayout layout{sub * len};
  const size_t origin = tile + static_cast<size_t>(sub) * len;

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
    for (u32 i = threadIdx.x; i < tile_len; i += blockDim.x) {
      const u64 x = reduce_4q(smem[i + (i >> 3)], q);
      const u64 y = mul_shoup(sub_mod(c[i], x, q), w, ws, q);
      out[tile + i] = add != nullptr ? add_mod(y, add[i], q) : y;
    }
  }
}

template <bool kForward>
void launch_ntt(const NttArgs& a, Stream stream) {
  if (a.rows == 0) return;
  const DeviceScope scope(stream.device);
  const Geometry g = split(a.log_n);
  const u32 n = 1u << a.log_n;
  const dim3 col_grid((n >> g.k1) / kColumnsPerBlock, static_cast<unsigned>(a.rows));
  const unsigned col_threads = kColumnsPerBlock * ((1u << g.k1) / kPerThread);
  const size_t col_smem = static_cast<size_t>(kColumnsPerBlock) * (1u << g.k1) * sizeof(u64);

  const u32 len = 1u << g.k2;
  const u32 rows_per_block = std::min<u32>(1u << g.k1, std::max<u32>(1u, kRowThreads / (len / kPerThread)));
  const dim3 row_grid((1u << g.k1) / rows_per_block, static_cast<unsigned>(a.rows));
  const unsigned row_threads = rows_per_block * (len / kPerThread);
  const u32 tile = rows_per_block * len;
  const size_t row_smem = static_cast<size_t>(tile + tile / 8) * sizeof(u64);

  cudaStream_t s = native(stream);
  const int rpb = static_cast<int>(rows_per_block);
  if (kForward) {
    ntt_columns<true><<<col_grid, col_threads, col_smem, s>>>(a.in, a.out, a.moduli, a.table, a.limbs, a.log_n, g.k1,
                                                                   a.skip, a.in_batch_stride);
    check_launch("ntt_columns<forward>");
    ntt_rows<true><<<row_grid, row_threads, row_smem, s>>>(a.out, a.out, a.moduli, a.table, a.limbs, a.log_n, g.k1,
                                                                   rpb, a.skip, a.epilogue, 0);
    check_launch("ntt_rows<forward>");
  } else {
    ntt_rows<false><<<row_grid, row_threads, row_smem, s>>>(a.in, a.out, a.moduli, a.table, a.limbs, a.log_n, g.k1,
                                                                    rpb, a.skip, a.epilogue, a.in_batch_stride);
    check_launch("ntt_rows<inverse>");
    ntt_columns<false><<<col_grid, col_threads, col_smem, s>>>(a.out, a.out, a.moduli, a.table, a.limbs, a.log_n,
                                                                       g.k1, a.skip, 0);
    check_launch("ntt_columns<inverse>");
  }
}

}  // namespace

void ntt_forward(const NttArgs& args, Stream stream) { launch_ntt<true>(args, stream); }
void ntt_inverse(const NttArgs& args, Stream stream) { launch_ntt<false>(args, stream); }

}  // namespace fhe::cuda
