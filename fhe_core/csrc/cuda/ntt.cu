// Batched negacyclic NTT on the GPU: two kernels per transform, each running a sub-NTT in shared memory.
//
// N = 2^log_n is viewed as a 2^k1 x 2^k2 matrix (k1 = log_n / 2). The first k1 forward stages only mix elements
// whose index agrees modulo T = 2^k2, i.e. the strided "columns" {r + c*T : c < 2^k1}; the remaining k2 stages only
// mix elements of a contiguous "row" of length 2^k2. So the forward transform is
//   ntt_columns: each block loads 8 adjacent columns (64-byte coalesced rows of the matrix) and runs the first k1
//                stages on them;
//   ntt_rows:    each block loads whole rows and runs the last k2 stages,
// and the inverse runs the same stages in reverse order (rows first, then columns, with 1/N folded into the very
// last butterfly). Inside a block, each thread holds 8 elements in registers per round and does up to 3 stages on
// them (one radix-8 unit, two radix-4 or four radix-2 units), so shared memory is touched once per 3 stages
// (cuda/ntt_rounds.cuh).
//
// A context's plan picks the reference kernels or the tuned ones (NttKernel, NttPlan in cuda/ntt_plan.cuh), which
// move the rows kernel's contiguous side in 16-byte accesses, read twiddles as (w, w') pairs, skip reductions in the
// butterflies where the prime leaves room, truncate the forward columns' Shoup quotients, compile in the row length
// at N = 2^16 and, with KernelPlan::fp64_butterflies, run the butterflies of small primes on the FP64 pipe
// (cuda/ntt_math.cuh). Both give the same words (canonical outputs).
#include "ntt_plan.cuh"

namespace fhe::cuda {
namespace {

// The compile-time choices of an NTT kernel, one type for the columns and rows kernels' template flags. The
// reference kernels are NttKernel<kForward>; the tuned ones read (w, w') pairs, move the rows' contiguous side
// directly (16-byte accesses), run lazy butterflies, truncated quotients in the forward columns and unreduced
// stages in the inverse (its rows kernel's first round with computed Shoup companions).
template <bool kForward_, bool kTuned_ = false, int kLen_ = 0, bool kFp64_ = false, bool kGalois_ = false,
          bool kProducts_ = false>
struct NttKernel {
  static constexpr bool kForward = kForward_;
  static constexpr bool kTuned = kTuned_;
  static constexpr int kLen = kLen_;            // the local length compiled in (N = 2^16: 8), 0: at run time
  static constexpr bool kFp64 = kFp64_;         // FP64 butterflies for the primes that fit
  static constexpr bool kGalois = kGalois_;     // rows: the forward adds sigma_k(add), the inverse reads sigma_k(in)
  static constexpr bool kProducts = kProducts_;  // inverse rows: in * times (HMult's d2)
  static constexpr bool kPairs = kTuned, kLazy = kTuned;
  static constexpr bool kTruncated = kTuned && kForward;
  static constexpr bool kUnreduced = kTuned && !kForward;
  // rows kernel blocks per SM: 7 (72 registers) for the FP64 forward (at 64 it spilled 28-48 bytes; 1.8 us faster
  // in HRotate) and the products' inverse, else 8 (64 registers)
  static constexpr int kRowsMinBlocks = (kForward && kFp64) || kProducts ? 7 : 8;
};

// First k1 forward stages / last k1 inverse stages. Grid: (T / 8, rows). Block: 8 * 2^k1 / 8, at most 256 threads;
// 64 registers keep four blocks resident per SM.
template <class K>
__global__ void __launch_bounds__(256, 4)
    ntt_columns(const u64* in, u64* out, const Modulus* __restrict__ moduli, const u64* __restrict__ table, int limbs,
                int log_n, int k1, NttSkip skip, int64_t in_batch_stride, int order) {
  constexpr bool kForward = K::kForward;
  extern __shared__ u64 smem[];
  if constexpr (K::kLen != 0) k1 = K::kLen;
  const u32 n = 1u << log_n;
  const int row = grid_row(limbs, order);
  const int limb = row % limbs;
  const u64 q = moduli[limb].value;  // (a constant table: read before the wait)
  pdl_wait();
  if (ntt_row_skipped(skip, row, limbs)) return;  // the whole block: no barrier is left waiting
  const auto t = global_twiddles<K::kPairs>(table, limb, n, kForward, 1u);
  using Tw = std::decay_t<decltype(t)>;
  const u32 col = threadIdx.x % kColumnsPerBlock;
  const u32 tcol = threadIdx.x / kColumnsPerBlock;
  const size_t column = blockIdx.x * kColumnsPerBlock + col;
  const size_t origin = static_cast<size_t>(row) * n + column;
  const int64_t in_row = in_batch_stride == 0 ? static_cast<int64_t>(row) * n
                                              : (row / limbs) * in_batch_stride + static_cast<int64_t>(limb) * n;
  const ColumnLayout layout{n >> k1, col};
  // The block's transform with twiddles (and arithmetic) tw; the inverse folds N^-1 into its last stage.
  const auto transform = [&](const auto& tw) {
    if constexpr (K::kLen != 0) {
      local_transform_fixed<kForward, K::kLen>(in + in_row + column, out + origin, smem, layout, tcol, tw, !kForward,
                                               q);
    } else {
      local_transform<kForward>(true, true, in + in_row + column, out + origin, smem, layout, tcol, k1, tw, !kForward,
                                q);
    }
  };
  if constexpr (kForward && K::kFp64) {
    if (fp64_forward_fits(q)) return transform(fp64_twiddles(table, limb, log_n, k1, q, true));
  }
  if constexpr (K::kTruncated) {
    if (trunc_forward_fits(q, log_n, k1)) return transform(TruncatedTwiddles<Tw>{t});
  }
  if constexpr (kForward && K::kLazy) {
    if (lazy_forward_fits(q, log_n)) return transform(LazyTwiddles<Tw>{t});
  }
  if constexpr (!kForward && K::kFp64) {  // (the rows kernel ran FP64 too: the same test)
    if (fp64_inverse_fits(q)) return transform(fp64_inverse_twiddles(table, limb, log_n, k1, q, true));
  }
  if constexpr (K::kUnreduced) {  // (larger primes: the lazy rounds below, as the rows kernel)
    if (unreduced_inverse_fits(q, log_n)) return transform(UnreducedTwiddles<Tw>{t, log_n});
  }
  if constexpr (!kForward && K::kLazy) {
    if (lazy_inverse_fits(q)) return transform(LazyTwiddles<Tw>{t});
  }
  transform(t);
}

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

// Where a rows-kernel block works: its transform row and limb, its rows of the 2^k1 x 2^k2 layout, its thread's
// place in them.
struct RowsBlock {
  u32 n;
  int k1, k2;
  u32 len;
  int row, limb;
  u64 q;
  u32 sub, tcol, first_row;
  size_t tile, origin;
  int64_t in_row;  // where the block's row of `in` starts
};

// The tuned forward rows: the columns kernel's values (FP64, truncated, lazy or Harvey's: the same test per prime)
// through the last k2 stages, stored by rows_store.
template <class K, class Tw>
__device__ __forceinline__ void rows_forward_tuned(const RowsBlock& b, const u64* in, u64* out, u64* smem,
                                                   const Modulus* moduli, const u64* table, int limbs, int log_n,
                                                   const NttEpilogue& epilogue, const Tw& t) {
  const RowLayout layout{b.sub * b.len};
  const Modulus m = moduli[b.limb];
  const auto run = [&](const auto& tw, u64 lazy_factor) {
    u64 v[kPerThread];
    rows_forward_to_registers(in + b.origin, smem, layout, b.tcol, b.k2, tw, b.q, v, [] { __syncthreads(); });
    const size_t offset = b.origin + b.tcol * kPerThread;
    rows_store<std::decay_t<decltype(tw)>::kLazy, K::kGalois>(v, out + offset, m, log_n, epilogue, b.row, b.limb, b.n,
                                                             offset, limbs, lazy_factor);
  };
  if constexpr (K::kFp64) {  // (the columns kernel ran FP64 too: the same test)
    if (fp64_forward_fits(b.q)) {
      return run(fp64_twiddles(table, b.limb, log_n, b.k1, b.q, false, b.first_row + b.sub), lazy_bound(log_n));
    }
  }
  // the columns kernel's values: below trunc_bound if it ran truncated, else lazy_bound
  const bool truncated = trunc_forward_fits(b.q, log_n, b.k1);
  if (truncated || lazy_forward_fits(b.q, log_n)) {
    return run(LazyTwiddles<Tw>{t}, truncated ? trunc_bound(log_n, b.k1) : lazy_bound(log_n));
  }
  run(t, 4);
}

// The tuned inverse rows: FP64, unreduced (the first round's Shoup companions computed), lazy or Harvey's rounds per
// prime, as the columns kernel.
template <class K, class Tw>
__device__ __forceinline__ void rows_inverse_tuned(const RowsBlock& b, const u64* in, u64* out, u64* smem,
                                                   const Modulus* moduli, const u64* table, int log_n, u64 galois,
                                                   u64* permuted, const u64* times, const Tw& t) {
  const RowLayout layout{b.sub * b.len};
  const u32 first = (b.first_row + b.sub) * b.len + b.tcol * kPerThread;  // the thread's 8 slots of the row
  u64* permuted_row = permuted == nullptr ? nullptr : permuted + static_cast<size_t>(b.row) * b.n;
  const u64* times_row = K::kProducts ? times + b.in_row : nullptr;  // (the second factor, laid out like in)
  const auto run = [&](const auto& tw, auto computed_first) {
    rows_inverse_direct<K::kGalois, K::kProducts, std::decay_t<decltype(tw)>, decltype(computed_first)::value>(
        in + b.in_row, out + b.origin, smem, layout, b.tcol, b.k2, first, tw, b.q, log_n, galois, permuted_row,
        times_row, moduli[b.limb]);
  };
  if constexpr (K::kFp64) {
    if (fp64_inverse_fits(b.q)) {
      return run(fp64_inverse_twiddles(table, b.limb, log_n, b.k1, b.q, false, b.first_row + b.sub),
                 std::false_type{});
    }
  }
  if (unreduced_inverse_fits(b.q, log_n)) return run(UnreducedTwiddles<Tw>{t, b.k2}, std::true_type{});
  if (lazy_inverse_fits(b.q)) return run(LazyTwiddles<Tw>{t}, std::false_type{});
  run(t, std::false_type{});
}

// The reference rows: the tile's contiguous side loaded and stored through shared memory, ModDown's epilogue (and
// sigma_k(add)) word by word.
template <class K, class Tw>
__device__ __forceinline__ void rows_reference(const RowsBlock& b, const u64* in, u64* out, u64* smem, int limbs,
                                               int rows_per_block, int log_n, const NttEpilogue& epilogue,
                                               const Tw& t) {
  const u32 tile_len = rows_per_block * b.len;
  const u64 q = b.q;
  if (!K::kForward) {  // coalesced load of the whole tile
    const u64* in_tile = in + b.in_row + static_cast<size_t>(b.first_row) * b.len;
    for (u32 i = threadIdx.x; i < tile_len; i += blockDim.x) smem[i + (i >> 3)] = in_tile[i];
    __syncthreads();
  }
  local_transform<K::kForward>(K::kForward, !K::kForward, in + b.origin, out + b.origin, smem, RowLayout{b.sub * b.len},
                               b.tcol, b.k2, t, false, q);
  if (!K::kForward) return;
  if (epilogue.sub_from == nullptr) {  // coalesced store of the whole tile, reduced to [0, q)
    for (u32 i = threadIdx.x; i < tile_len; i += blockDim.x) out[b.tile + i] = reduce_4q(smem[i + (i >> 3)], q);
    return;
  }
  const int64_t batch = b.row / limbs;  // the same store through ModDown's (c - x) * P^-1
  const u64* c = epilogue.sub_from + batch * epilogue.batch_stride + static_cast<int64_t>(b.limb) * b.n +
                 static_cast<int64_t>(b.first_row) * b.len;
  const u64 w = epilogue.consts[b.limb], ws = epilogue.consts_shoup[b.limb];
  const u64* add = batch < epilogue.add_batches ? epilogue.add + b.tile : nullptr;  // same layout as out
  const u64* add_row = add != nullptr ? add - static_cast<size_t>(b.first_row) * b.len : nullptr;
  for (u32 i = threadIdx.x; i < tile_len; i += blockDim.x) {
    const u64 x = reduce_4q(smem[i + (i >> 3)], q);
    const u64 y = mul_shoup(sub_mod(c[i], x, q), w, ws, q);
    const u64 a = add == nullptr              ? 0
                  : epilogue.add_galois == 1 ? add[i]
                                             : add_row[galois_ntt_source(b.first_row * b.len + i, epilogue.add_galois,
                                                                         log_n)];
    out[b.tile + i] = add != nullptr ? add_mod(y, a, q) : y;
  }
}

// Last k2 forward stages / first k2 inverse stages on whole rows. Grid: (2^k1 / rows_per_block, rows). The reference
// kernel stages the contiguous side of each transform (the forward output, the inverse input) through shared memory,
// the tuned ones move it with 16-byte accesses (load8). K::kGalois (tuned): the forward adds sigma_k(epilogue.add)
// (k = epilogue.add_galois), the inverse transforms sigma_k(in) (k = galois) and stores it to `permuted` (a
// rotation's ModUp needs it for the digits' own rows). K::kProducts (tuned inverse): HMult's d2, in * times,
// transformed and stored to `permuted`.
template <class K>
__global__ void __launch_bounds__(kRowThreads, K::kRowsMinBlocks)
    ntt_rows(const u64* in, u64* out, const Modulus* __restrict__ moduli, const u64* __restrict__ table, int limbs,
             int log_n, int k1, int rows_per_block, NttSkip skip, NttEpilogue epilogue, int64_t in_batch_stride,
             int order, u64 galois, u64* permuted, const u64* times) {
  extern __shared__ u64 smem[];
  RowsBlock b;
  b.n = 1u << log_n;
  b.k1 = k1;
  b.k2 = K::kLen != 0 ? K::kLen : log_n - k1;  // K::kLen: the compile-time row length at N = 2^16 (k1 = k2)
  b.len = 1u << b.k2;
  b.row = grid_row(limbs, order);
  b.limb = b.row % limbs;
  b.q = moduli[b.limb].value;
  pdl_wait();
  if (ntt_row_skipped(skip, b.row, limbs)) return;
  const u32 threads_per_row = b.len / kPerThread;
  b.sub = threadIdx.x / threads_per_row;  // row of the block
  b.tcol = threadIdx.x % threads_per_row;
  b.first_row = blockIdx.x * rows_per_block;
  b.tile = static_cast<size_t>(b.row) * b.n + static_cast<size_t>(b.first_row) * b.len;
  b.origin = b.tile + static_cast<size_t>(b.sub) * b.len;
  b.in_row = in_batch_stride == 0 ? static_cast<int64_t>(b.row) * b.n
                                  : (b.row / limbs) * in_batch_stride + static_cast<int64_t>(b.limb) * b.n;
  const auto t = global_twiddles<K::kPairs>(table, b.limb, b.n, K::kForward, (1u << k1) + b.first_row + b.sub);
  if constexpr (K::kTuned && K::kForward) {
    rows_forward_tuned<K>(b, in, out, smem, moduli, table, limbs, log_n, epilogue, t);
  } else if constexpr (K::kTuned) {
    rows_inverse_tuned<K>(b, in, out, smem, moduli, table, log_n, galois, permuted, times, t);
  } else {
    rows_reference<K>(b, in, out, smem, limbs, rows_per_block, log_n, epilogue, t);
  }
}

// ---- launching --------------------------------------------------------------------------------------------

using ColumnsKernel = decltype(&ntt_columns<NttKernel<true>>);
using RowsKernel = decltype(&ntt_rows<NttKernel<true>>);
struct NttKernels {
  ColumnsKernel columns;
  RowsKernel rows;
};

template <bool kForward, int kLen, bool kFp64>
NttKernels tuned_kernels(bool galois, bool products) {
  using K = NttKernel<kForward, true, kLen, kFp64>;
  if constexpr (!kForward) {
    if (products) return {ntt_columns<K>, ntt_rows<NttKernel<false, true, kLen, kFp64, false, true>>};
  }
  if (galois) return {ntt_columns<K>, ntt_rows<NttKernel<kForward, true, kLen, kFp64, true>>};
  return {ntt_columns<K>, ntt_rows<K>};
}

// The kernels of a plan; `galois`: the forward adds sigma_k(epilogue.add) / the inverse reads sigma_k(in); `products`
// (inverse): in * times.
template <bool kForward>
NttKernels ntt_kernels(const NttPlan& p, bool galois, bool products) {
  using Reference = NttKernel<kForward>;
  if (!p.tuned) return {ntt_columns<Reference>, ntt_rows<Reference>};
  if (p.fixed16) {
    return p.fp64 ? tuned_kernels<kForward, 8, true>(galois, products)
                  : tuned_kernels<kForward, 8, false>(galois, products);
  }
  return p.fp64 ? tuned_kernels<kForward, 0, true>(galois, products)
                : tuned_kernels<kForward, 0, false>(galois, products);
}

template <bool kForward>
void launch_ntt(const NttArgs& a, Stream stream);

// The reference kernels' rotation and HMult inputs: sigma_k(in) or in * times first, into `permuted`, then the
// plain inverse of those.
void launch_inverse_composed(const NttArgs& a, Stream stream) {
  if (a.galois != 1) {
    automorphism_ntt(AutomorphismArgs{a.in, a.permuted, a.moduli, a.rows, a.limbs, a.log_n, a.galois}, stream);
  } else {
    elementwise(ElementwiseArgs{ElementwiseOp::kMul, a.in, a.times, nullptr, nullptr, nullptr, a.permuted, a.moduli,
                                a.rows, a.rows, a.limbs, int64_t{1} << a.log_n},
                stream);
  }
  NttArgs plain = a;
  plain.in = a.permuted;
  plain.in_batch_stride = 0;
  plain.galois = 1;
  plain.times = nullptr;
  plain.permuted = nullptr;
  launch_ntt<false>(plain, stream);
}

template <bool kForward>
void launch_ntt(const NttArgs& a, Stream stream) {
  if (a.rows == 0) return;
  const DeviceScope scope(stream.device);
  const NttPlan plan = ntt_plan(a, kForward);
  const bool galois = kForward ? a.epilogue.sub_from != nullptr && a.epilogue.add != nullptr &&
                                     a.epilogue.add_galois != 1
                               : a.galois != 1;
  const bool products = !kForward && a.times != nullptr;
  if (!kForward && (galois || products) && !plan.tuned) return launch_inverse_composed(a, stream);
  const LaunchShape shape = launch_shape(a.log_n, a.rows);
  const dim3 row_grid(shape.row_blocks, static_cast<unsigned>(a.rows));
  const size_t row_smem = static_cast<size_t>(shape.tile + shape.tile / 8) * sizeof(u64);
  const int k1 = shape.g.k1, rpb = static_cast<int>(shape.rows_per_block);
  const NttKernels kernels = ntt_kernels<kForward>(plan, galois, products);
  cudaStream_t s = native(stream);
  if (kForward) {
    launch(kernels.columns, shape.col_grid, shape.col_threads, shape.col_smem, s, "ntt_columns<forward>", a.in, a.out,
           a.moduli, a.table, a.limbs, a.log_n, k1, a.skip, a.in_batch_stride, plan.first_order);
    launch(kernels.rows, row_grid, shape.row_threads, row_smem, s, "ntt_rows<forward>", a.out, a.out, a.moduli,
           a.table, a.limbs, a.log_n, k1, rpb, a.skip, a.epilogue, int64_t{0}, plan.second_order, u64{1},
           static_cast<u64*>(nullptr), static_cast<const u64*>(nullptr));
  } else {
    launch(kernels.rows, row_grid, shape.row_threads, row_smem, s, "ntt_rows<inverse>", a.in, a.out, a.moduli, a.table,
           a.limbs, a.log_n, k1, rpb, a.skip, NttEpilogue{}, a.in_batch_stride, plan.first_order, a.galois,
           a.store_permuted ? a.permuted : nullptr, a.times);
    launch(kernels.columns, shape.col_grid, shape.col_threads, shape.col_smem, s, "ntt_columns<inverse>", a.out,
           a.out, a.moduli, a.table, a.limbs, a.log_n, k1, a.skip, int64_t{0}, plan.second_order);
  }
}

}  // namespace

void launch_tuned_forward_columns(const NttArgs& a, const NttPlan& plan, const LaunchShape& shape, cudaStream_t s) {
  launch(ntt_kernels<true>(plan, false, false).columns, shape.col_grid, shape.col_threads, shape.col_smem, s,
         "ntt_columns<forward>", a.in, a.out, a.moduli, a.table, a.limbs, a.log_n, shape.g.k1, a.skip, int64_t{0},
         plan.first_order);
}

void ntt_forward(const NttArgs& args, Stream stream) { launch_ntt<true>(args, stream); }
void ntt_inverse(const NttArgs& args, Stream stream) { launch_ntt<false>(args, stream); }

}  // namespace fhe::cuda
