// Key switching on the GPU: the inner product of the gadget digits with a switching key (ks_inner_product), and
// ModUp's last forward NTT pass fused with it (ntt_inner_product): the rows kernels' last stages of each digit
// multiplied straight into the key rows, the transformed digits never in memory.
#include "ntt_plan.cuh"

namespace fhe::cuda {
namespace {

constexpr int kThreads = 256;

// One thread per coefficient of one limb computes both output components, reading each digit word once and
// accumulating the dnum products in 128 bits.
__global__ void ks_inner_product_kernel(KsInnerProductArgs a, bool early) {
  pdl_trigger(early);
  pdl_wait();  // (element-wise: no prologue worth running before it)
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= a.n) return;
  const int limb = blockIdx.y;
  const Modulus m = a.moduli[limb];
  const int64_t key_row = ks_key_row(limb, a.q_count, a.p_row);
  U128 acc0{0, 0}, acc1{0, 0};
  for (int j = 0; j < a.dnum; ++j) {
    const u64 d = a.digits[(static_cast<int64_t>(j) * a.limbs + limb) * a.n + i];
    const u64* k = a.key + (static_cast<int64_t>(j) * 2 * a.key_rows + key_row) * a.n + i;
    mac128(acc0, d, k[0]);
    mac128(acc1, d, k[a.key_rows * a.n]);
  }
  a.out[static_cast<int64_t>(limb) * a.n + i] = reduce128(acc0, m);
  a.out[(static_cast<int64_t>(a.limbs) + limb) * a.n + i] = reduce128(acc1, m);
}

// ---- ModUp's last forward pass with the key-switching inner product: ntt_rows_inner_product ----------------
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
// The 128-bit sums of component 0 live in registers, those of component 1 in shared memory (kSharedComponents).
constexpr int kSharedComponents = 1;
template <class Tw>
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
  // The thread's 8 x 128-bit sums of both output components: the first kRegisterComponents in registers, the others
  // in shared memory, [component][word][thread] with kRowThreads threads (every N >= 2^10 fills the block; a warp's
  // 16-byte accesses are consecutive).
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
      rows_forward_to_registers(nt.out + row * n + word, smem, layout, tcol, k2, t, q, v, [] { __syncthreads(); });
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
// limbs' rows last). Shared memory: the rows tile (tile_words), then component 1's sums. 4 blocks per SM at 128
// registers (ptxas at N = 2^16, sm_90), no spills.
template <int kLen>
__global__ void __launch_bounds__(kRowThreads, 4)
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
    rows_inner_product(a, smem, acc_smem, layout, tcol, k2, word, LazyTwiddles<std::decay_t<decltype(t)>>{t}, m, limb);
  } else {
    rows_inner_product(a, smem, acc_smem, layout, tcol, k2, word, t, m, limb);
  }
}

// ---- ntt_digits_inner_product: the digits in parallel inside a block (up to kMaxDigitGroups digits) ------------
//
// ntt_rows_inner_product walks the digits one after another in every thread, its 128-bit sums live through each
// digit's transform (128 registers, and each warp alternates a long transform with a long wait on the key rows).
// Here a block holds one group of kGroupThreads threads per digit over the same kGroupThreads * 8 words of limb i
// (rows_per_group = kGroupThreads * 8 / 2^k2 rows of the layout): group j runs the last k2 forward stages of digit
// j's rows (or reads the digit's own row as it is), multiplies its 8 words by key[j][c][i] and writes the 128-bit
// products to shared memory; after one barrier all threads of the block sum the groups' products of a word (exact:
// below 4 * 2^125), reduce once (reduce128: the canonical residue) and store 16 bytes per thread, a warp's stores
// contiguous. No sum lives through a transform, and while one group transforms, another one's key loads are in
// flight. Both components at once: 80 registers, 3 blocks of 4 groups per SM.
constexpr int kMaxDigitGroups = 4;
constexpr int kGroupThreads = 64;

// Barrier of one group: named barrier 1 + group (__syncthreads is barrier 0), the id an immediate (with an id in a
// register ptxas reserves all 16 barriers).
__device__ __forceinline__ void group_barrier(int group) {
  static_assert(kMaxDigitGroups == 4, "one case per group");
  switch (group) {
    case 0: asm volatile("bar.sync 1, %0;" ::"r"(kGroupThreads) : "memory"); break;
    case 1: asm volatile("bar.sync 2, %0;" ::"r"(kGroupThreads) : "memory"); break;
    case 2: asm volatile("bar.sync 3, %0;" ::"r"(kGroupThreads) : "memory"); break;
    default: asm volatile("bar.sync 4, %0;" ::"r"(kGroupThreads) : "memory"); break;
  }
}

// Shared-memory slot of the 128-bit product (component c, group thread tid, word k): [c][tid][k] with k swizzled by
// tid, so that 8 threads writing the same k and 8 threads reading 16 consecutive words hit 8 different 16-byte banks.
__device__ __forceinline__ u32 product_slot(int c, u32 tid, int k) {
  return (static_cast<u32>(c) * kGroupThreads + tid) * kPerThread + (static_cast<u32>(k) ^ (tid & 7u));
}

// NttInnerProductArgs::tensor_a: HMult's tensor terms t_0 = a0 b0, t_1 = a0 b1 + a1 b0 in the own
// group's products of a limb i of Q (the group that only reads its digit's own row and then waits for the others'
// transforms). ModDown computes (x_c - Conv([x_c]_P)) * P^-1 mod q_i and Conv reads only the P rows, so adding
// (P mod q_i) * t_c to x_c's Q rows here gives (x_c - Conv) * P^-1 + t_c mod q_i: after the single reduce128 and
// ModDown's canonical store, the same words as the tensor product's pass before the key switch. t_c mod q_i by
// ShortBarrett (t_1 < 2 q^2), times P mod q_i (< q) as a 128-bit product added to the group's product slot: the
// block's sum of a word stays below 17 q^2 < 2^127 (q < 2^61; at most kMaxDigitGroups products of a lazy word below
// 4q and a key word, plus this one).
// Reads 16 bytes per operand at a time, two pairs of words per step (unrolled fully: 32 bytes of spills in the
// kLen 0 kernel, none at kLen 8); the own thread wrote the slots, so no barrier before the read.
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
    ulonglong2& slot = products[product_slot(c, tid, k)];
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

// The group's 8 words of its digit's row of limb i: the own row as it is, or the last k2 forward stages of the
// columns kernel's output (FP64, lazy or Harvey's, the columns kernel's test per prime) in the group's region.
template <int kLen>
__device__ __forceinline__ void group_digit_words(const NttInnerProductArgs& a, int k1, bool truncated_columns,
                                                  bool fp64_rows, u64* region, int limb, int group, u32 tid,
                                                  u32 first_row, u32 mine, bool own_row, u64 q, u64 (&v)[kPerThread]) {
  const NttArgs& nt = a.ntt;
  const int log_n = nt.log_n;
  const int64_t n = int64_t{1} << log_n;
  const int64_t row = static_cast<int64_t>(group) * nt.limbs + limb;
  if (own_row) {
    if (a.own == nullptr) load8(nt.out + row * n + mine, v);
    else load8_own(a, limb, mine, v);
    return;
  }
  const int k2 = kLen != 0 ? kLen : log_n - k1;
  const u32 len = 1u << k2, threads_per_row = len / kPerThread;
  const u32 sub = tid / threads_per_row, tcol = tid % threads_per_row;
  const auto t = global_twiddles<true>(nt.table, limb, static_cast<u32>(n), true, (1u << k1) + first_row + sub);
  const RowLayout layout{sub * len};
  const u64* in = nt.out + row * n + first_row * len + sub * len;  // the thread's row
  const auto barrier = [group] { group_barrier(group); };
  const bool truncated = truncated_columns && trunc_forward_fits(q, log_n, k1);
  if (fp64_rows && fp64_forward_fits(q)) {  // (the columns kernel ran FP64 too: the same test)
    rows_forward_to_registers(in, region, layout, tcol, k2,
                              fp64_twiddles(nt.table, limb, log_n, k1, q, false, first_row + sub), q, v, barrier);
  } else if (truncated || lazy_forward_fits(q, log_n)) {
    rows_forward_to_registers(in, region, layout, tcol, k2, LazyTwiddles<std::decay_t<decltype(t)>>{t}, q, v, barrier);
  } else {
    rows_forward_to_registers(in, region, layout, tcol, k2, t, q, v, barrier);
  }
  group_barrier(group);  // the group's tile is read: its products may overwrite it
}

// After the block's barrier: every thread sums the groups' products of 16-byte output units, reduces and stores.
__device__ __forceinline__ void sum_group_products(const NttInnerProductArgs& a, const u64* smem, u32 region_words,
                                                   int limb, u32 first, const Modulus& m) {
  const int64_t n = int64_t{1} << a.ntt.log_n;
  constexpr u32 kUnits = 2 * kGroupThreads * kPerThread / 2;  // 16-byte output units of both components
  for (u32 u = threadIdx.x; u < kUnits; u += blockDim.x) {
    const int c = static_cast<int>(u / (kGroupThreads * kPerThread / 2));
    const u32 word = 2 * (u % (kGroupThreads * kPerThread / 2));  // of the block's words
    const u32 owner = word / kPerThread;
    const int k = static_cast<int>(word % kPerThread);
    U128 s0{0, 0}, s1{0, 0};
    for (int j = 0; j < a.ip.dnum; ++j) {
      const ulonglong2* pj = reinterpret_cast<const ulonglong2*>(smem + static_cast<size_t>(j) * region_words);
      const ulonglong2 x = pj[product_slot(c, owner, k)];
      const ulonglong2 y = pj[product_slot(c, owner, k + 1)];
      s0 = add128(s0, U128{x.x, x.y});
      s1 = add128(s1, U128{y.x, y.y});
    }
    *reinterpret_cast<ulonglong2*>(a.ip.out + (static_cast<int64_t>(c) * a.ntt.limbs + limb) * n + first + word) =
        make_ulonglong2(reduce128(s0, m), reduce128(s1, m));
  }
}

// Grid: (2^k1 / rows_per_group, limbs), the limbs backwards (as ntt_rows_inner_product). Block: dnum groups of
// kGroupThreads. Shared memory: one region of region_words per group (its rows tile during the transform, then its
// products).
template <int kLen>
__global__ void __launch_bounds__(kMaxDigitGroups * kGroupThreads, 3)
    ntt_digits_inner_product(NttInnerProductArgs a, int k1, bool truncated_columns, bool fp64_rows,
                             u32 region_words) {
  extern __shared__ u64 smem[];
  const NttArgs& nt = a.ntt;
  const KsInnerProductArgs& ip = a.ip;
  const int64_t n = int64_t{1} << nt.log_n;
  const int k2 = kLen != 0 ? kLen : nt.log_n - k1;
  const u32 len = 1u << k2;
  const int limb = nt.limbs - 1 - static_cast<int>(blockIdx.y);
  const Modulus m = nt.moduli[limb];
  const int group = static_cast<int>(threadIdx.x) / kGroupThreads;  // = the digit
  const u32 tid = threadIdx.x % kGroupThreads;
  const u32 first_row = blockIdx.x * (kGroupThreads / (len / kPerThread));
  const u32 first = first_row * len;  // the block's first word of a limb row (its rows are contiguous)
  const u32 mine = first + tid * kPerThread;
  u64* region = smem + static_cast<size_t>(group) * region_words;
  ulonglong2* products = reinterpret_cast<ulonglong2*>(region);
  const u64* key = ip.key +
                   (ks_key_row(limb, ip.q_count, ip.p_row) + static_cast<int64_t>(group) * 2 * ip.key_rows) * n + mine;
  const bool own_row = ntt_row_skipped(nt.skip, static_cast<int64_t>(group) * nt.limbs + limb, nt.limbs);
  u64 v[kPerThread];
  pdl_wait();
  group_digit_words<kLen>(a, k1, truncated_columns, fp64_rows, region, limb, group, tid, first_row, mine, own_row,
                          m.value, v);
  u64 w[2][kPerThread];
  load8(key, w[0]);
  load8(key + ip.key_rows * n, w[1]);
#pragma unroll
  for (int c = 0; c < 2; ++c) {
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const U128 z = mul_wide(v[k], w[c][k]);
      products[product_slot(c, tid, k)] = make_ulonglong2(z.lo, z.hi);
    }
  }
  if (own_row && a.tensor_a != nullptr) add_tensor_products(a, limb, mine, tid, m, products);
  __syncthreads();
  sum_group_products(a, smem, region_words, limb, first, m);
}

// ModUp's forward NTT and the inner product (NttInnerProductArgs): the columns kernel as launch_ntt's forward,
// then ntt_digits_inner_product (up to kMaxDigitGroups digits) or ntt_rows_inner_product. Where the fused kernels do
// not apply (the reference plan or a pointer off 16-byte alignment) the two ops in turn.
template <int kLen>
void launch_rows_inner_product(const NttInnerProductArgs& a, dim3 grid, unsigned threads, u32 tile_words, int k1,
                               int rows_per_block, bool truncated, cudaStream_t s) {
  const size_t smem = (tile_words + static_cast<size_t>(kPerThread) * threads * 2) * sizeof(u64);
  launch(ntt_rows_inner_product<kLen>, grid, threads, smem, s, "ntt_rows_inner_product", a, k1, rows_per_block,
         truncated, tile_words);
}

// ntt_digits_inner_product: one group of kGroupThreads threads per digit. False where it does not apply (more than
// kMaxDigitGroups digits, a row longer than a group's 8 words per thread): ntt_rows_inner_product runs then.

bool digits_inner_product_fits(const NttInnerProductArgs& a, int k1) {
  const int dnum = a.ip.dnum;
  const u32 threads_per_row = (1u << (a.ntt.log_n - k1)) / kPerThread;
  return dnum >= 1 && dnum <= kMaxDigitGroups && threads_per_row <= kGroupThreads &&
         (1u << k1) * threads_per_row >= kGroupThreads;
}

template <int kLen>
void launch_digits_inner_product(const NttInnerProductArgs& a, int k1, bool truncated, bool fp64_rows, cudaStream_t s) {
  const int dnum = a.ip.dnum;
  const int k2 = a.ntt.log_n - k1;
  const u32 threads_per_row = (1u << k2) / kPerThread;
  const u32 rows_per_group = kGroupThreads / threads_per_row;
  // a group's region: its rows tile (9 words per 8: RowLayout's pad) or its products, whichever is larger
  const u32 tile_words = rows_per_group * (1u << k2) * 9 / 8;
  const u32 region_words = std::max<u32>((tile_words + 1) & ~1u, 2 * kGroupThreads * kPerThread * 2);
  const size_t smem = static_cast<size_t>(dnum) * region_words * sizeof(u64);
  const auto kernel = ntt_digits_inner_product<kLen>;
  if (smem > 48 * 1024) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
          "cudaFuncSetAttribute(ntt_digits_inner_product)");
  }
  const dim3 grid((1u << k1) / rows_per_group, static_cast<unsigned>(a.ntt.limbs));
  launch(kernel, grid, static_cast<unsigned>(dnum * kGroupThreads), smem, s, "ntt_digits_inner_product", a, k1,
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
  if (a.tensor_a != nullptr && !tensor_terms_apply(a))  // (the glue checks first: a clear error there)
    throw std::runtime_error("ntt_inner_product: tensor terms need the digit-group kernel");
  if (!fused_inner_product_applies(a)) {  // (the glue has copied `own`'s rows into the digits then)
    ntt_forward(nt, stream);
    ks_inner_product(a.ip, stream);
    return;
  }
  const DeviceScope scope(stream.device);
  const NttPlan plan = ntt_plan(nt, true);
  const LaunchShape shape = launch_shape(nt.log_n, nt.rows);
  const Geometry g = shape.g;
  cudaStream_t s = native(stream);
  launch_tuned_forward_columns(nt, plan, shape, s);
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

void ks_inner_product(const KsInnerProductArgs& a, Stream stream) {
  if (a.limbs == 0) return;
  const DeviceScope scope(stream.device);
  const dim3 grid(blocks_for(a.n, kThreads), static_cast<unsigned>(a.limbs));
  launch_triggering(ks_inner_product_kernel, grid, kThreads, 0, native(stream), "ks_inner_product_kernel", a);
}

void ntt_inner_product(const NttInnerProductArgs& args, Stream stream) { launch_ntt_inner_product(args, stream); }
bool ntt_inner_product_fuses(const NttInnerProductArgs& args) { return fused_inner_product_applies(args); }
bool ntt_inner_product_takes_tensor(const NttInnerProductArgs& args) { return tensor_terms_apply(args); }

}  // namespace fhe::cuda
