// Fused passes of the bootstrapping circuit on the GPU (see kernels.h): the key-switching inner
// product with the automorphism of its digits and its neighbouring additions folded in, and linear
// combinations of ciphertexts with constant coefficients. Both are memory-bound: each reads its
// operands once and writes its result once, where the composed ops made a pass per step.
#include "../common/ntt.h"
#include "launch.cuh"

namespace fhe::cuda {
namespace {

constexpr int kThreads = 256;

struct alignas(16) Pair {
  u64 x, y;
};

// One thread per coefficient x of one limb (blockIdx.y), both output components. The automorphism
// permutes NTT slots within aligned blocks (the low bits of the output index fix the high bits of
// the source), so the 32 gathered reads of a warp fall into one 256-byte block: coalesced.
__global__ void ks_inner_product_fused_kernel(KsInnerProductFusedArgs f, bool early) {
  pdl_trigger(early);
  pdl_wait();  // (element-wise: no prologue worth running before it)
  const KsInnerProductArgs& a = f.base;
  const int64_t x = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (x >= a.n) return;
  const int limb = blockIdx.y;
  const Modulus m = a.moduli[limb];
  const int64_t key_row = ks_key_row(limb, a.q_count, a.p_row);
  const int64_t src = f.galois == 1 ? x : galois_ntt_source(static_cast<u32>(x), f.galois, f.log_n);
  U128 acc0{0, 0}, acc1{0, 0};
  for (int j = 0; j < a.dnum; ++j) {
    const u64 d = a.digits[(static_cast<int64_t>(j) * a.limbs + limb) * a.n + src];
    const u64* k = a.key + (static_cast<int64_t>(j) * 2 * a.key_rows + key_row) * a.n + x;
    mac128(acc0, d, k[0]);
    mac128(acc1, d, k[a.key_rows * a.n]);
  }
  u64* out0 = a.out + static_cast<int64_t>(limb) * a.n + x;
  u64* out1 = out0 + f.out_stride;
  u64 r0 = reduce128(acc0, m), r1 = reduce128(acc1, m);
  const int add_row = limb - (a.limbs - f.add_rows);
  if (f.add != nullptr && add_row >= 0) {
    const int64_t s = f.add_galois == 1 ? x : galois_ntt_source(static_cast<u32>(x), f.add_galois, f.log_n);
    r0 = add_mod(r0, f.add[static_cast<int64_t>(add_row) * a.n + s], m.value);
  }
  if (f.accumulate) {
    r0 = add_mod(r0, *out0, m.value);
    r1 = add_mod(r1, *out1, m.value);
  }
  *out0 = r0;
  *out1 = r1;
}

// Four consecutive words per thread (16-byte accesses: N % 4 == 0 and every row 16-byte aligned,
// which holds for N >= 2^10 words per row); one (component, limb) row per blockIdx.y.
__global__ void linear_combination_kernel(LinearCombinationArgs a, bool early) {
  pdl_trigger(early);
  pdl_wait();  // (element-wise: no prologue worth running before it)
  const int64_t row = blockIdx.y;  // b * limbs + i
  const int limb = static_cast<int>(row % a.limbs);
  const int64_t b = row / a.limbs;
  const int64_t x = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) * 4;
  if (x >= a.n) return;
  const Modulus m = a.moduli[limb];
  const int half = x >= a.n / 2 ? 1 : 0;
  U128 acc[4] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}};
  for (int k = 0; k < a.count; ++k) {
    const u64 w = a.weights[(static_cast<int64_t>(k) * a.limbs + limb) * 2 + half];
    const u64* t = a.terms[k] + b * a.term_stride[k] + static_cast<int64_t>(limb) * a.n + x;
    const Pair p0 = *reinterpret_cast<const Pair*>(t);
    const Pair p1 = *reinterpret_cast<const Pair*>(t + 2);
    mac128(acc[0], p0.x, w);
    mac128(acc[1], p0.y, w);
    mac128(acc[2], p1.x, w);
    mac128(acc[3], p1.y, w);
  }
  u64 r[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) r[e] = reduce128(acc[e], m);
  if (a.constant != nullptr && b < a.constant_components) {
    const u64 c = a.constant[limb * 2 + half];
#pragma unroll
    for (int e = 0; e < 4; ++e) r[e] = add_mod(r[e], c, m.value);
  }
  u64* out = a.out + b * a.out_stride + static_cast<int64_t>(limb) * a.n + x;
  *reinterpret_cast<Pair*>(out) = Pair{r[0], r[1]};
  *reinterpret_cast<Pair*>(out + 2) = Pair{r[2], r[3]};
}

// One thread per coefficient x of one limb; every baby word is loaded once and multiplied into the
// accumulators of each giant that uses it (the index table is uniform over the launch: no divergence).
__global__ void giant_products_kernel(GiantProductsArgs a, bool early) {
  pdl_trigger(early);
  pdl_wait();  // (element-wise: no prologue worth running before it)
  const int64_t x = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (x >= a.n) return;
  const int limb = blockIdx.y;
  const Modulus m = a.moduli[limb];
  const int64_t plane = static_cast<int64_t>(a.limbs) * a.n, at = static_cast<int64_t>(limb) * a.n + x;
  U128 acc[kMaxGiants][2];
#pragma unroll
  for (int g = 0; g < kMaxGiants; ++g) acc[g][0] = acc[g][1] = U128{0, 0};
  for (int j = 0; j < a.n_babies; ++j) {
    const u64 b0 = a.babies[2 * j * plane + at], b1 = a.babies[(2 * j + 1) * plane + at];
#pragma unroll
    for (int g = 0; g < kMaxGiants; ++g) {
      const int t = g < a.giants ? a.index[g][j] : -1;
      if (t < 0) continue;
      const u64 p = a.pts[g][t * plane + at];
      mac128(acc[g][0], p, b0);
      mac128(acc[g][1], p, b1);
    }
  }
#pragma unroll
  for (int g = 0; g < kMaxGiants; ++g) {
    if (g >= a.giants) break;
    a.out[g * plane + at] = reduce128(acc[g][0], m);
    a.out[a.out_stride + g * plane + at] = reduce128(acc[g][1], m);
  }
}

// One thread per coefficient x of one limb, the babies in turn (kernels.h, KsInnerProductBabiesArgs).
__global__ void ks_inner_product_babies_kernel(KsInnerProductBabiesArgs f, bool early) {
  pdl_trigger(early);
  pdl_wait();  // (element-wise: no prologue worth running before it)
  const KsInnerProductArgs& a = f.base;
  const int64_t x = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (x >= a.n) return;
  const int limb = blockIdx.y;
  const Modulus m = a.moduli[limb];
  const int64_t key_row = ks_key_row(limb, a.q_count, a.p_row);
  const int64_t at = static_cast<int64_t>(limb) * a.n + x, plane = static_cast<int64_t>(a.limbs) * a.n;
  const int add_row = limb - (a.limbs - f.add_rows);
  for (int b = 0; b < f.count; ++b) {
    const int64_t src = galois_ntt_source(static_cast<u32>(x), f.galois[b], f.log_n);
    const u64* digits = a.digits + static_cast<int64_t>(limb) * a.n + src;
    const u64* key = f.keys[b] + key_row * a.n + x;
    U128 acc0{0, 0}, acc1{0, 0};
    for (int j = 0; j < a.dnum; ++j) {
      const u64 d = digits[static_cast<int64_t>(j) * plane];
      const u64* k = key + static_cast<int64_t>(j) * 2 * a.key_rows * a.n;
      // the key words are read once: streaming loads (evict first), so the digit rows stay in L2
      mac128(acc0, d, __ldcs(reinterpret_cast<const unsigned long long*>(k)));
      mac128(acc1, d, __ldcs(reinterpret_cast<const unsigned long long*>(k + a.key_rows * a.n)));
    }
    u64 r0 = reduce128(acc0, m);
    if (f.add != nullptr && add_row >= 0) r0 = add_mod(r0, f.add[static_cast<int64_t>(add_row) * a.n + src], m.value);
    f.outs[b][at] = r0;
    f.outs[b][plane + at] = reduce128(acc1, m);
  }
}

// As ks_inner_product_kernel for two digit sets sharing the key: the key (2/3 of the bytes) read once.
__global__ void ks_inner_product_pair_kernel(KsInnerProductPairArgs p, bool early) {
  pdl_trigger(early);
  pdl_wait();  // (element-wise: no prologue worth running before it)
  const KsInnerProductArgs& a = p.base;
  const int64_t x = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (x >= a.n) return;
  const int limb = blockIdx.y;
  const Modulus m = a.moduli[limb];
  const int64_t key_row = ks_key_row(limb, a.q_count, a.p_row);
  U128 acc[2][2] = {{{0, 0}, {0, 0}}, {{0, 0}, {0, 0}}};  // [set][component]
  for (int j = 0; j < a.dnum; ++j) {
    const int64_t at = (static_cast<int64_t>(j) * a.limbs + limb) * a.n + x;
    const u64 d0 = a.digits[at], d1 = p.digits_b[at];
    const u64* k = a.key + (static_cast<int64_t>(j) * 2 * a.key_rows + key_row) * a.n + x;
    const u64 k0 = k[0], k1 = k[a.key_rows * a.n];
    mac128(acc[0][0], d0, k0);
    mac128(acc[0][1], d0, k1);
    mac128(acc[1][0], d1, k0);
    mac128(acc[1][1], d1, k1);
  }
  const int64_t plane = static_cast<int64_t>(a.limbs) * a.n, at = static_cast<int64_t>(limb) * a.n + x;
#pragma unroll
  for (int c = 0; c < 2; ++c)
#pragma unroll
    for (int i = 0; i < 2; ++i) a.out[(2 * c + i) * plane + at] = reduce128(acc[i][c], m);
}

}  // namespace

void ks_inner_product_babies(const KsInnerProductBabiesArgs& a, Stream stream) {
  if (a.base.limbs == 0 || a.count == 0) return;
  const DeviceScope scope(stream.device);
  const dim3 grid(blocks_for(a.base.n, kThreads), static_cast<unsigned>(a.base.limbs));
  launch_triggering(ks_inner_product_babies_kernel, grid, kThreads, 0, native(stream),
                    "ks_inner_product_babies_kernel", a);
}

void ks_inner_product_pair(const KsInnerProductPairArgs& a, Stream stream) {
  if (a.base.limbs == 0) return;
  const DeviceScope scope(stream.device);
  const dim3 grid(blocks_for(a.base.n, kThreads), static_cast<unsigned>(a.base.limbs));
  launch_triggering(ks_inner_product_pair_kernel, grid, kThreads, 0, native(stream), "ks_inner_product_pair_kernel", a);
}

void giant_products(const GiantProductsArgs& a, Stream stream) {
  if (a.giants == 0 || a.limbs == 0) return;
  const DeviceScope scope(stream.device);
  const dim3 grid(blocks_for(a.n, kThreads), static_cast<unsigned>(a.limbs));
  launch_triggering(giant_products_kernel, grid, kThreads, 0, native(stream), "giant_products_kernel", a);
}

void ks_inner_product_fused(const KsInnerProductFusedArgs& a, Stream stream) {
  if (a.base.limbs == 0) return;
  const DeviceScope scope(stream.device);
  const dim3 grid(blocks_for(a.base.n, kThreads), static_cast<unsigned>(a.base.limbs));
  launch_triggering(ks_inner_product_fused_kernel, grid, kThreads, 0, native(stream),
                    "ks_inner_product_fused_kernel", a);
}

void linear_combination(const LinearCombinationArgs& a, Stream stream) {
  if (a.batch == 0 || a.limbs == 0) return;
  const DeviceScope scope(stream.device);
  const dim3 grid(blocks_for(a.n, kThreads * 4), static_cast<unsigned>(a.batch * a.limbs));
  launch_triggering(linear_combination_kernel, grid, kThreads, 0, native(stream), "linear_combination_kernel", a);
}

}  // namespace fhe::cuda
