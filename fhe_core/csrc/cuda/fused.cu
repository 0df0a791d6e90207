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
__global__ void ks_inner_product_fused_kernel(KsInnerProductFusedArgs f) {
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
__global__ void linear_combination_kernel(LinearCombinationArgs a) {
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
  u64* out = a.out + row * a.n + x;
  *reinterpret_cast<Pair*>(out) = Pair{r[0], r[1]};
  *reinterpret_cast<Pair*>(out + 2) = Pair{r[2], r[3]};
}

}  // namespace

void ks_inner_product_fused(const KsInnerProductFusedArgs& a, Stream stream) {
  if (a.base.limbs == 0) return;
  const DeviceScope scope(stream.device);
  const dim3 grid(blocks_for(a.base.n, kThreads), static_cast<unsigned>(a.base.limbs));
  ks_inner_product_fused_kernel<<<grid, kThreads, 0, native(stream)>>>(a);
  check_launch("ks_inner_product_fused_kernel");
}

void linear_combination(const LinearCombinationArgs& a, Stream stream) {
  if (a.batch == 0 || a.limbs == 0) return;
  const DeviceScope scope(stream.device);
  const dim3 grid(blocks_for(a.n, kThreads * 4), static_cast<unsigned>(a.batch * a.limbs));
  linear_combination_kernel<<<grid, kThreads, 0, native(stream)>>>(a);
  check_launch("linear_combination_kernel");
}

}  // namespace fhe::cuda
