// Fast basis conversion on the GPU (ConvArgs): the reference kernel (a 128-bit multiply-accumulate per term) and,
// with KernelPlan::tensor_core_conv, a byte-sliced integer matrix product on the tensor cores; and the centred lift.
#include <algorithm>
#include <atomic>
#include <limits>

#include "launch.cuh"

namespace fhe::cuda {
namespace {

constexpr int kThreads = 256;

bool aligned16(const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Fast basis conversion of one or several digits (see ConvArgs). Grid: (N / 128, batch * dnum *
// output groups). A thread owns one coefficient, one digit and one group of kConvGroup output rows.
// Both halves matter (docs/performance.md): one thread per coefficient alone leaves the GPU
// latency-bound (65,536 threads at N = 2^16 with long dependent chains), and splitting the outputs
// only pays once each multiply-accumulate is cheap: mac128 (two PTX instructions) on constants
// staged in shared memory (broadcast reads), zero-padded so the inner loop carries no predicates.
// The digit's scaled inputs y_k are recomputed per group (alpha Shoup products against
// alpha * kConvGroup MACs).
constexpr int kConvThreads = 128;
constexpr int kConvGroup = 4;

__global__ void conv_kernel(ConvArgs a, int groups) {
  extern __shared__ u64 smem[];
  u64* y = smem;                                // [alpha][kConvThreads]
  u64* consts = smem + a.alpha * kConvThreads;   // [alpha][kConvGroup]
  const int64_t b = blockIdx.y / (a.dnum * groups);
  const int j = blockIdx.y / groups % a.dnum;
  const int r0 = (blockIdx.y % groups) * kConvGroup;
  const int first = j * a.alpha, count = min(a.alpha, a.q_count - first);
  const int width = min(kConvGroup, a.rows - r0);
  for (int e = threadIdx.x; e < a.alpha * kConvGroup; e += kConvThreads) {
    const int k = e / kConvGroup, r = e % kConvGroup;
    consts[e] = (r < width) ? a.qhat_mod_p[(static_cast<int64_t>(j) * a.alpha + k) * a.rows + r0 + r] : 0;
  }
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kConvThreads + threadIdx.x;
  const bool active = i < a.n;
  const u64* in = a.in + b * a.q_count * a.n + i;
  if (active)
    for (int k = 0; k < count; ++k) {
      const int row = first + k;
      y[k * kConvThreads + threadIdx.x] = mul_shoup(in[row * a.n], a.qhat_inv[row], a.qhat_inv_shoup[row], a.src[row].value);
    }
  __syncthreads();
  if (!active) return;
  U128 acc[kConvGroup] = {};
  for (int k = 0; k < count; ++k) {
    const u64 yk = y[k * kConvThreads + threadIdx.x];
#pragma unroll
    for (int r = 0; r < kConvGroup; ++r) mac128(acc[r], yk, consts[k * kConvGroup + r]);
  }
  if (a.neg_q_mod_p != nullptr) {  // exact centred conversion: subtract v*Q (see ConvArgs)
    const u64 u = conv_rounded_overflow(y + threadIdx.x, kConvThreads, a.src + first, count);
#pragma unroll
    for (int r = 0; r < kConvGroup; ++r)
      if (r < width) mac128(acc[r], u, a.neg_q_mod_p[r0 + r]);
  }
  u64* out = a.out + ((b * a.dnum + j) * a.rows + r0) * a.n + i;
#pragma unroll
  for (int r = 0; r < kConvGroup; ++r) {
    if (r >= width) continue;
    const int own = conv_own_index(a, j, r0 + r);
    if (own < 0) out[r * a.n] = reduce128(acc[r], a.dst[r0 + r]);
    else if (a.own_copy) out[r * a.n] = a.own[(first + own) * a.n + i];
  }
}

// ---- Conv on the tensor cores ---------------------------------------------------------------------
//
// Conv is a matrix product with one small constant matrix: out[c][r] = sum_k y_k[c] C[k][r] mod p_r.
// Cut every y into bytes and move the byte's weight into the constant: with
//   D[k][a][r] = 2^(8a) C[k][r] mod p_r   (8 bytes D_b each, a, b < 8),
//   sum_k y_k C[k][r] = sum_{k,a} ybyte_a(y_k) D[k][a][r] = sum_b 2^(8b) T_b   (mod p_r),
//   T_b = sum_{k,a} ybyte_a(y_k) * byte_b(D[k][a][r]),
// and T is an exact integer product of a [coefficients x 8 slots] byte matrix by an [8 slots x 8]
// byte matrix per output prime: one mma.sync m16n8k32 (u8 x u8 -> s32) per 16 coefficients, 4 slots
// and prime, with K = (k, a) and N = b. T_b <= 8 * slots * 255^2 < 2^23 for slots <= 16, so
// V = sum_b 2^(8b) T_b < 2^80 and one reduce128 per output finishes: the result is the canonical
// residue of the same sum the reference kernel computes, bit for bit. The exact (centred) conversion
// is one more slot: y = u (the rounded multiple of Q, computed from the y_k as in conv_kernel) with
// C = (-Q) mod p_r. Per output this costs ~2 slots/4 MMAs and ~60 integer instructions (the byte
// sums' recombination across a lane quad and the reduction) instead of ~21 per multiply-accumulate.
//
// Fragment layouts (PTX ISA, mma.m16n8k32 with 8-bit operands), lane = 4 g + t:
//   A (16 x 32, row-major): a0 = row g, K 4t..4t+3; a1 = row g+8, same K; a2/a3 = K + 16.
//   B (32 x 8, column):     b0 = K 4t..4t+3 of column g; b1 = K + 16.
//   C (16 x 8, s32):        c0, c1 = row g, columns 2t, 2t+1; c2, c3 = row g+8.
// With K = 8 k_local + a (k_local < 4 slots per K tile), the four bytes a0 holds are one 32-bit half
// of one y: a0 = half (t & 1) of y[4 kt + (t >> 1)] of coefficient g, a2 the same for slot + 2.
constexpr int kMmaWarps = 4;
constexpr int kMmaTile = 32 * kMmaWarps;   // coefficients per tile: two m16 tiles per warp
// Output primes per block (grid.y groups of rows): as many as shared memory allows (32, or 16 with
// 4 K tiles), so that the per-tile work (loading x, the y_k, the exact conversion's double-precision
// quotient) is shared by up to 32 rows; a first version with 8 redid it 4x for 31 rows.
template <int KT>
constexpr int mma_rows() { return KT <= 3 ? 32 : 16; }
constexpr int kMmaMaxRows = 32;            // mma_rows<KT>() at most
constexpr int kMmaMaxSlots = 16;           // y slots (input limbs, + 1 for the exact conversion)
constexpr int kMmaYStride = kMmaTile + 8;  // u64 per slot row in shared memory: 272 words = 16 mod 32 banks,
                                           // so the A-fragment reads of a warp hit 32 distinct banks

__device__ __forceinline__ void mma_u8(int (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();  // never launched there (launch_conv_mma_if_applicable): fail loudly rather than return zeros
#endif
}

// (x * 256) mod q for x < q < 2^61. The quotient (< 256) from a double estimate is off by at most
// one (relative error ~2^-52 of a value below 256), so the remainder before correction lies in
// [-q, 2q), which a signed word holds; the wrap-around of x << 8 cancels modulo 2^64.
__device__ __forceinline__ u64 times256_mod(u64 x, u64 q, double scale) {
  const u64 estimate = static_cast<u64>(__dmul_rn(__ull2double_rn(x), scale));
  int64_t r = static_cast<int64_t>((x << 8) - estimate * q);
  if (r < 0) r += static_cast<int64_t>(q);
  else if (r >= static_cast<int64_t>(q)) r -= static_cast<int64_t>(q);
  return static_cast<u64>(r);
}

// Builds the B fragments of one (slot k, output row rr) in shared memory: D[k][a] for a < 8, and
// for every byte b the two words that lane 4b + 2 (k & 1) + h (h = a / 4) holds in register
// (k & 3) / 2 of K tile k / 4. bfrag: [rows][KT][32 lanes][2].
template <int KT>
__device__ void build_b_fragments(u32* bfrag, int k, int rr, u64 c, u64 q) {
  u64 d[8];
  d[0] = c;
  const double scale = 256.0 / static_cast<double>(q);
#pragma unroll
  for (int a = 1; a < 8; ++a) d[a] = times256_mod(d[a - 1], q, scale);
  const int kt = k / 4, reg = (k & 3) / 2;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int b = 0; b < 8; ++b) {
      const int shift = (b & 3);
      u32 w[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) w[e] = static_cast<u32>(d[4 * h + e] >> (b < 4 ? 0 : 32));
      // bytes `shift` of w[0..3], in that order
      const u32 lo = __byte_perm(w[0], w[1], shift | ((4 + shift) << 4));
      const u32 hi = __byte_perm(w[2], w[3], shift | ((4 + shift) << 4));
      const u32 word = __byte_perm(lo, hi, 0x5410);
      const int lane = 4 * b + 2 * (k & 1) + h;
      bfrag[((rr * KT + kt) * 32 + lane) * 2 + reg] = word;
    }
  }
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

// The A fragments of a warp's two 16-coefficient halves from the staged y_k (ys32: the [slots][kMmaYStride]
// words as 32-bit halves): lane (g, t) holds, per K tile, the low or high half (t & 1) of y for slots
// 4 kt + t / 2 and + 2, coefficients cb and cb + 8 (the m16n8k32 row-major A layout).
template <int KT>
__device__ __forceinline__ void load_a_fragments(const u32* ys32, int warp, int g, int t, u32 (&af)[2][KT][4]) {
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    const int cb = 32 * warp + 16 * m + g;
#pragma unroll
    for (int kt = 0; kt < KT; ++kt) {
      const int k0 = 4 * kt + (t >> 1), k1 = k0 + 2;
      af[m][kt][0] = ys32[(k0 * kMmaYStride + cb) * 2 + (t & 1)];
      af[m][kt][1] = ys32[(k0 * kMmaYStride + cb + 8) * 2 + (t & 1)];
      af[m][kt][2] = ys32[(k1 * kMmaYStride + cb) * 2 + (t & 1)];
      af[m][kt][3] = ys32[(k1 * kMmaYStride + cb + 8) * 2 + (t & 1)];
    }
  }
}

template <int KT>
constexpr int mma_blocks_per_sm() { return KT <= 3 ? 8 : 5; }  // 64 registers; 96 with 4 K tiles (80 spill)

// ---- the tensor-core kernel's rows ----
//
// A group's rows are converted rows only (ModUp's own rows are copied after the tiles, 16 bytes per copy); a row's
// constants {q, 2^50 mod q, mu, shift, output offset} are one 32-byte shared record (MmaRow); the lane quad's four
// 32-bit partial sums are transposed through 512 bytes of shared memory per warp (four conflict-free 4-byte stores,
// one 16-byte load per lane); for q >= 2^32, V < 2^80 is first folded at 2^50 so that the Barrett quotient fits 32
// bits (reduce_quad_sums); with ConvArgs::lazy_out the result is left in [0, 3q) for the forward NTT that follows.

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

// The split of a digit's rows over grid.y: `groups` groups of at most `group_rows` converted rows, and
// (ModUp with `own`) at most `own_rows` of the digit's own rows copied by each group.
struct LeanSplit {
  int groups;
  int group_rows;
  int own_rows;
};

constexpr int kLeanScratchWords = kMmaWarps * 32 * 4;  // u32: per warp, 32 coefficients x 4 partial sums

template <int KT>
constexpr size_t lean_smem_bytes(int group_rows) {
  return sizeof(u64) * 4 * KT * kMmaYStride                 // ys
         + sizeof(u32) * kLeanScratchWords                  // the quads' transposition
         + sizeof(uint2) * group_rows * KT * 32             // B fragments
         + sizeof(MmaRow) * group_rows                      // row constants
         + sizeof(Modulus) * 4 * KT + sizeof(u64) * 2 * 4 * KT;  // slot moduli, qhat_inv (+ Shoup)
}

// conv_rounded_overflow's sum (the same correctly rounded quotients, added in the same order: the same
// result), with the 4 KT quotients computed first so that their divisions need not wait for each other.
template <int KT>
__device__ __forceinline__ u64 rounded_overflow_unrolled(const u64* y, int64_t stride, const Modulus* src, int count) {
  double quotient[4 * KT];
#pragma unroll
  for (int k = 0; k < 4 * KT; ++k)
    quotient[k] = k < count ? __ddiv_rn(__ull2double_rn(y[k * stride]), __ull2double_rn(src[k].value)) : 0.0;
  double sum = 0.5;
#pragma unroll
  for (int k = 0; k < 4 * KT; ++k)
    if (k < count) sum = __dadd_rn(sum, quotient[k]);
  return static_cast<u64>(sum);
}

// Output row of a digit's converted row c: the rows before its own block, then those after it.
__device__ __forceinline__ int lean_output_row(int c, int own_lo, int own_count) {
  return c < own_lo ? c : c + own_count;
}

__device__ __forceinline__ void cp_async8(void* shared, const void* global) {
  const u32 address = static_cast<u32>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(address), "l"(global) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// The shared memory of a block of the tensor-core kernel (lean_smem_bytes).
template <int KT>
struct LeanShared {
  u64 (*ys)[kMmaYStride];  // [4 KT slots][tile]: a tile's x, then its y_k
  u32* scratch;            // the lane quads' transposition
  uint2* bfrag;            // [group rows][KT][32 lanes]: the B fragments
  MmaRow* rows;            // [group rows]
  Modulus* slot_mod;       // [4 KT]
  u64* slot_inv;           // [2][4 KT]: qhat_inv, its Shoup companion
  __device__ explicit LeanShared(u64* smem, int group_rows)
      : ys(reinterpret_cast<u64(*)[kMmaYStride]>(smem)),
        scratch(reinterpret_cast<u32*>(smem + 4 * KT * kMmaYStride)),
        bfrag(reinterpret_cast<uint2*>(scratch + kLeanScratchWords)),
        rows(reinterpret_cast<MmaRow*>(bfrag + group_rows * KT * 32)),
        slot_mod(reinterpret_cast<Modulus*>(rows + group_rows)),
        slot_inv(reinterpret_cast<u64*>(slot_mod + 4 * KT)) {}
};

// What a block converts: digit j of batch b, the group's converted rows [c_begin, c_begin + width) (in the digit's
// converted-row numbering, lean_output_row) and its own rows [own_begin, own_end) of the digit's own_count.
struct LeanBlock {
  int64_t b;
  int j, first, count;
  bool exact;
  int own_count, own_lo, c_begin, width, own_begin, own_end;
  __device__ LeanBlock(const ConvArgs& a, const LeanSplit& split) {
    b = blockIdx.y / (a.dnum * split.groups);
    j = blockIdx.y / split.groups % a.dnum;
    const int group = blockIdx.y % split.groups;
    first = j * a.alpha;
    count = min(a.alpha, a.q_count - first);
    exact = a.neg_q_mod_p != nullptr;
    own_count = a.own != nullptr ? count : 0;
    own_lo = a.own_begin + j * a.alpha;
    c_begin = group * split.group_rows;
    width = max(0, min(split.group_rows, a.rows - own_count - c_begin));  // converted rows here
    own_begin = min(own_count, group * split.own_rows);
    own_end = min(own_count, own_begin + split.own_rows);
  }
};

// The block's constants in shared memory: the B fragments of its rows (copied from ConvArgs::mma_fragments, or
// built: 4 KT x rows chains of 7 modular shifts), its rows' MmaRow records, its digit's slot moduli and qhat_inv.
template <int KT>
__device__ __forceinline__ void lean_constants(const ConvArgs& a, const LeanSplit& split, const LeanBlock& d,
                                               const LeanShared<KT>& sh) {
  const int tid = threadIdx.x;
  if (a.mma_fragments != nullptr) {  // precomputed: the group's rows, 16 bytes per copy
    const uint4* table = reinterpret_cast<const uint4*>(a.mma_fragments) + static_cast<int64_t>(d.j) * a.rows * KT * 16;
    uint4* fragments = reinterpret_cast<uint4*>(sh.bfrag);
    for (int e = tid; e < d.width * KT * 16; e += kMmaTile)
      fragments[e] = table[lean_output_row(d.c_begin + e / (KT * 16), d.own_lo, d.own_count) * KT * 16 + e % (KT * 16)];
  } else {
    for (int chain = tid; chain < 4 * KT * split.group_rows; chain += kMmaTile) {  // one (slot, row) chain
      const int k = chain / split.group_rows, rr = chain % split.group_rows;
      u64 c = 0, q = 1;
      if (rr < d.width) {
        const int r = lean_output_row(d.c_begin + rr, d.own_lo, d.own_count);
        q = a.dst[r].value;
        if (k < d.count) c = a.qhat_mod_p[(static_cast<int64_t>(d.j) * a.alpha + k) * a.rows + r];
        else if (d.exact && k == d.count) c = a.neg_q_mod_p[r];
      }
      build_b_fragments<KT>(reinterpret_cast<u32*>(sh.bfrag), k, rr, c, q);
    }
  }
  for (int rr = tid; rr < d.width; rr += kMmaTile) {
    const int r = lean_output_row(d.c_begin + rr, d.own_lo, d.own_count);
    sh.rows[rr] = mma_row(a.dst[r], static_cast<u32>(r * a.n));
  }
  for (int k = tid; k < d.count; k += kMmaTile) {
    sh.slot_mod[k] = a.src[d.first + k];
    sh.slot_inv[k] = a.qhat_inv[d.first + k];
    sh.slot_inv[4 * KT + k] = a.qhat_inv_shoup[d.first + k];
  }
}

// The tile's x (this thread's column, copied by cp.async) into y in place: the y_k, and (exact) the rounded
// multiple of Q in slot count.
template <int KT>
__device__ __forceinline__ void lean_scale_tile(const LeanBlock& d, const LeanShared<KT>& sh) {
  const int tid = threadIdx.x;
  u64 x[4 * KT];
  cp_async_wait_all();  // this thread's own copies: no barrier needed to read them
#pragma unroll
  for (int k = 0; k < 4 * KT; ++k) x[k] = k < d.count ? sh.ys[k][tid] : 0;
#pragma unroll
  for (int k = 0; k < 4 * KT; ++k)
    if (k < d.count) sh.ys[k][tid] = mul_shoup(x[k], sh.slot_inv[k], sh.slot_inv[4 * KT + k], sh.slot_mod[k].value);
  for (int k = d.count; k < 4 * KT; ++k)
    sh.ys[k][tid] =
        d.exact && k == d.count ? rounded_overflow_unrolled<KT>(&sh.ys[0][tid], kMmaYStride, sh.slot_mod, d.count) : 0;
}

// The tile's output rows: per row, KT MMAs per 16 coefficients, the lane quad's partial sums transposed through the
// warp's scratch, one reduction per output.
template <int KT, bool kLazy>
__device__ __forceinline__ void lean_rows(const ConvArgs& a, const LeanBlock& d, const LeanShared<KT>& sh,
                                          const u32 (&af)[2][KT][4], u64* out_tile, u32* quad, int coefficient) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  for (int rr = 0; rr < d.width; ++rr) {
    int acc[2][4] = {};
#pragma unroll
    for (int kt = 0; kt < KT; ++kt) {
      const uint2 bf = sh.bfrag[(rr * KT + kt) * 32 + lane];
      mma_u8(acc[0], af[0][kt], bf.x, bf.y);
      mma_u8(acc[1], af[1][kt], bf.x, bf.y);
    }
    // P = T_2t + 2^8 T_2t+1 (< 2^32) of coefficient 16 m + g + 8 h of the warp, weight 2^(16 t) in its V: word
    // 4 (16 m + g + 8 h) + t, 32 consecutive words per store (no bank conflict); each lane then reads the four words
    // of its own coefficient as 16 bytes.
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        quad[4 * (16 * m + g + 8 * h) + t] =
            static_cast<u32>(acc[m][2 * h]) + (static_cast<u32>(acc[m][2 * h + 1]) << 8);
    __syncwarp();
    const uint4 p = reinterpret_cast<const uint4*>(quad)[coefficient - 32 * warp];
    __syncwarp();  // every lane has read before the next row's stores
    const MmaRow row = sh.rows[rr];
    out_tile[row.offset] = reduce_quad_sums<kLazy>(p, row, a.dst, a.n);
  }
}

// The group's own rows (ModUp) over the block's tiles, after the conversion (whose registers the copies would
// otherwise crowd): 16 bytes per thread, four copies in flight.
__device__ __forceinline__ void lean_copy_own(const ConvArgs& a, const LeanBlock& d, u64* out, int64_t tile_count) {
  const int own_rows = a.own_copy ? d.own_end - d.own_begin : 0;
  const int64_t copies = ((tile_count - blockIdx.x + gridDim.x - 1) / gridDim.x) * own_rows * (kMmaTile / 2);
  const int64_t own_first = d.first - d.own_lo;  // own row k + own_lo comes from input row first + k
  for (int64_t e0 = threadIdx.x; e0 < copies; e0 += 4 * kMmaTile) {
    ulonglong2 v[4];
    int64_t target[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int64_t e = e0 + u * kMmaTile;
      const int64_t pair = e % (kMmaTile / 2), rest = e / (kMmaTile / 2);
      const int64_t column = (blockIdx.x + rest / own_rows * gridDim.x) * kMmaTile + 2 * pair;
      target[u] = (d.own_lo + d.own_begin + rest % own_rows) * a.n + column;
      if (e < copies) v[u] = *reinterpret_cast<const ulonglong2*>(a.own + target[u] + own_first * a.n);
    }
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (e0 + u * kMmaTile < copies) *reinterpret_cast<ulonglong2*>(out + target[u]) = v[u];
  }
}

// The tensor-core Conv: a wave of blocks looping over the tiles of kMmaTile coefficients. The next tile's x is
// copied by cp.async into ys while the rows of this one run (ys is idle once every warp holds its A fragments: one
// more barrier per tile, no more shared memory). pdl_wait first: the first tile's x is in flight while the
// constants are built.
template <int KT, bool kLazy>
__global__ void __launch_bounds__(kMmaTile, mma_blocks_per_sm<KT>())
    conv_mma_lean_kernel(ConvArgs a, LeanSplit split) {
  extern __shared__ u64 conv_smem[];
  pdl_wait();
  const LeanShared<KT> sh(conv_smem, split.group_rows);
  const LeanBlock d(a, split);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t = lane % 4;
  const u64* in = a.in + (d.b * a.q_count + d.first) * a.n + tid;
  const int64_t tile_count = a.n / kMmaTile;
  if (d.width > 0)  // the first tile's x, in flight while the constants are built
    for (int k = 0; k < d.count; ++k) cp_async8(&sh.ys[k][tid], in + k * a.n + blockIdx.x * kMmaTile);
  lean_constants<KT>(a, split, d, sh);
  __syncthreads();  // the first tile reads the slot constants

  u64* out = a.out + (d.b * a.dnum + d.j) * a.rows * a.n;
  const u32* ys32 = reinterpret_cast<const u32*>(&sh.ys[0][0]);
  u32* quad = sh.scratch + warp * 128;
  const int coefficient = 32 * warp + 16 * (t >> 1) + g + 8 * (t & 1);  // this lane's result, in the tile
  for (int64_t tile = blockIdx.x; d.width > 0 && tile < tile_count; tile += gridDim.x) {
    lean_scale_tile<KT>(d, sh);
    __syncthreads();
    u32 af[2][KT][4];
    load_a_fragments<KT>(ys32, warp, g, t, af);
    const int64_t next = tile + gridDim.x;
    if (next < tile_count) {
      __syncthreads();  // every warp holds its A fragments: ys is free for the next tile's x
      for (int k = 0; k < d.count; ++k) cp_async8(&sh.ys[k][tid], in + k * a.n + next * kMmaTile);
    }
    lean_rows<KT, kLazy>(a, d, sh, af, out + tile * kMmaTile + coefficient, quad, coefficient);
  }
  lean_copy_own(a, d, out, tile_count);
}

// Blocks of the tensor-core kernel the device holds at once (SMs x blocks per SM), asked once per device and
// group size: a cache of hardware facts, safe to fill from several threads (they store the same value). The
// queries are not stream work, but a launcher inside a CUDA-graph capture should do as little else as possible.
template <int KT>
int64_t mma_resident_blocks(int device, int group_rows) {
  static std::atomic<int> cached[kMaxDevices][kMmaMaxRows + 1] = {};
  if (device < 0 || device >= kMaxDevices || group_rows > kMmaMaxRows) return 1;
  int blocks = cached[device][group_rows].load(std::memory_order_relaxed);
  if (blocks == 0) {
    int sms = 0, per_sm = 0;
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, conv_mma_lean_kernel<KT, false>, kMmaTile,
                                                        lean_smem_bytes<KT>(group_rows)),
          "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    blocks = std::max(sms, 1) * std::max(per_sm, 1);
    cached[device][group_rows].store(blocks, std::memory_order_relaxed);
  }
  return blocks;
}

struct LeanGeometry {
  LeanSplit split{};
  int64_t blocks_x = 0, blocks_y = 0;
};

// The split of a digit's converted rows (ModUp: 31 or 33 of 42 per digit) into the fewest groups of at most
// mma_rows<KT>() rows (ModUp 2 x 17, ModDown 1 x 31), so that each tile's x, y_k and quotient are computed as few
// times as possible (a tile's own work costs about as much as 9 output rows: measured on an H200 against the
// cost model's more groups), and of the tiles over the blocks: one wave, or one tile per block, whichever a cost
// model (waves x tiles per block x (4 (tile cost + rows) + own rows); a tile ~6 rows, ~11 with the exact
// conversion's quotient; an own row a quarter, 16-byte copies) prefers.
template <int KT>
LeanGeometry lean_geometry(const ConvArgs& a, int device) {
  const int64_t tile_count = a.n / kMmaTile;
  const int64_t tile_cost = a.neg_q_mod_p != nullptr ? 11 : 6;
  const int own_max = a.own != nullptr ? std::min(a.alpha, a.q_count) : 0;
  const int own_min = a.own != nullptr ? a.q_count - (a.dnum - 1) * a.alpha : 0;  // the last digit's
  const int converted = a.rows - own_min;  // the most converted rows of a digit
  const int groups = std::max(1, (converted + mma_rows<KT>() - 1) / mma_rows<KT>());
  const int group_rows = std::max(1, (converted + groups - 1) / groups);
  const int own_rows = (own_max + groups - 1) / groups;
  const int64_t resident = mma_resident_blocks<KT>(device, group_rows);
  const int64_t blocks_y = a.batch * a.dnum * groups;
  const int64_t one_wave = std::clamp<int64_t>(resident / blocks_y, 1, tile_count);
  LeanGeometry best;
  int64_t best_cost = std::numeric_limits<int64_t>::max();
  for (const int64_t tiles_per_block : {(tile_count + one_wave - 1) / one_wave, int64_t{1}}) {
    const int64_t blocks_x = (tile_count + tiles_per_block - 1) / tiles_per_block;
    const int64_t waves = (blocks_x * blocks_y + resident - 1) / resident;
    const int64_t cost = waves * tiles_per_block * (4 * (tile_cost + group_rows) + own_rows);
    if (cost < best_cost) {
      best_cost = cost;
      best = {{groups, group_rows, own_rows}, blocks_x, blocks_y};
    }
  }
  return best;
}

template <int KT>
void launch_conv_mma(const ConvArgs& args, Stream stream) {
  ConvArgs a = args;
  if (!aligned16(a.mma_fragments)) a.mma_fragments = nullptr;  // (then built per block)
  const LeanGeometry geometry = lean_geometry<KT>(a, stream.device);
  const dim3 grid(static_cast<unsigned>(geometry.blocks_x), static_cast<unsigned>(geometry.blocks_y));
  const size_t smem = lean_smem_bytes<KT>(geometry.split.group_rows);
  const auto kernel = a.lazy_out ? conv_mma_lean_kernel<KT, true> : conv_mma_lean_kernel<KT, false>;
  launch(kernel, grid, kMmaTile, smem, native(stream), "conv_mma_lean_kernel", a, geometry.split);
}

// The tensor-core path (ConvArgs::plan) applies to N a multiple of the tile, 2 to 16 slots and (ModUp) 16-byte
// aligned own rows, which it copies 16 bytes at a time; else conv_kernel (with one slot, as in BFV's digits of one
// prime, each output is a single product: nothing to batch). Integer mma.sync (u8) needs sm_80 or newer; older GPUs
// take the reference kernel.
bool launch_conv_mma_if_applicable(const ConvArgs& a, Stream s) {
  const int slots = a.alpha + (a.neg_q_mod_p != nullptr ? 1 : 0);
  if (!a.plan.tensor_core_conv || a.n % kMmaTile != 0 || slots < 2 || slots > kMmaMaxSlots) return false;
  if (a.own != nullptr && (!aligned16(a.own) || !aligned16(a.out))) return false;
  if (compute_major(s.device) < 8) return false;
  switch ((slots + 3) / 4) {
    case 1: launch_conv_mma<1>(a, s); break;
    case 2: launch_conv_mma<2>(a, s); break;
    case 3: launch_conv_mma<3>(a, s); break;
    default: launch_conv_mma<4>(a, s); break;
  }
  return true;
}

// One thread per coefficient: read x once, write its lift into every output limb (coalesced).
__global__ void center_lift_kernel(CenterLiftArgs a, bool early) {
  pdl_trigger(early);
  pdl_wait();  // (element-wise: no prologue worth running before it)
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= a.n) return;
  const int64_t b = blockIdx.y;
  const u64 x = a.in[b * a.n + i];
  u64* out = a.out + b * a.l_out * a.n + i;
  for (int j = 0; j < a.l_out; ++j) out[j * a.n] = center_lift_one(x, a.src, a.dst[j]);
}

}  // namespace

void conv(const ConvArgs& a, Stream stream) {
  if (a.batch == 0 || a.dnum == 0) return;
  const DeviceScope scope(stream.device);
  if (launch_conv_mma_if_applicable(a, stream)) return;
  const size_t smem = static_cast<size_t>(a.alpha) * (kConvThreads + kConvGroup) * sizeof(u64);
  check(cudaFuncSetAttribute(conv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
        "cudaFuncSetAttribute(conv_kernel)");
  const int groups = (a.rows + kConvGroup - 1) / kConvGroup;
  const dim3 grid(blocks_for(a.n, kConvThreads), static_cast<unsigned>(a.batch * a.dnum * groups));
  conv_kernel<<<grid, kConvThreads, smem, native(stream)>>>(a, groups);
  check_launch("conv_kernel");
}

void center_lift(const CenterLiftArgs& a, Stream stream) {
  if (a.batch == 0) return;
  const DeviceScope scope(stream.device);
  const dim3 grid(blocks_for(a.n, kThreads), static_cast<unsigned>(a.batch));
  launch_triggering(center_lift_kernel, grid, kThreads, 0, native(stream), "center_lift_kernel", a);
}

}  // namespace fhe::cuda
