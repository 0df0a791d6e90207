// GPU key-switching inner product: one thread per coefficient of one limb computes both output
// components, reading each digit word once and accumulating the dnum products in 128 bits.
#include "../common/modarith.h"
#include "launch.cuh"

namespace fhe::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void ks_inner_product_kernel(KsInnerProductArgs a) {
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

// One thread per (coefficient, digit, group of kGroup output rows): the digit's alpha scaled inputs
// wait in shared memory, the group's constants are staged there too (zero-padded), and each output
// is a chain of mac128 (see bconv_kernel in rns.cu for why both halves of this layout matter).
constexpr int kModUpThreads = 128;
constexpr int kModUpGroup = 4;

__global__ void mod_up_conv_kernel(ModUpConvArgs a, int groups) {
  extern __shared__ u64 smem[];
  u64* y = smem;                                  // [alpha][kModUpThreads]
  u64* consts = smem + a.alpha * kModUpThreads;    // [alpha][kModUpGroup]
  const int j = blockIdx.y / groups;
  const int r0 = (blockIdx.y % groups) * kModUpGroup;
  const int first = j * a.alpha, count = min(a.alpha, a.q_count - first);
  const int width = min(kModUpGroup, a.rows - r0);
  for (int e = threadIdx.x; e < a.alpha * kModUpGroup; e += kModUpThreads) {
    const int k = e / kModUpGroup, r = e % kModUpGroup;
    consts[e] = (r < width) ? a.qhat_mod_p[(static_cast<int64_t>(j) * a.alpha + k) * a.rows + r0 + r] : 0;
  }
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kModUpThreads + threadIdx.x;
  const bool active = i < a.n;
  if (active)
    for (int k = 0; k < count; ++k) {
      const int row = first + k;
      y[k * kModUpThreads + threadIdx.x] =
          mul_shoup(a.in[row * a.n + i], a.qhat_inv[row], a.qhat_inv_shoup[row], a.src[row].value);
    }
  __syncthreads();
  if (!active) return;
  U128 acc[kModUpGroup] = {};
  for (int k = 0; k < count; ++k) {
    const u64 yk = y[k * kModUpThreads + threadIdx.x];
#pragma unroll
    for (int r = 0; r < kModUpGroup; ++r) mac128(acc[r], yk, consts[k * kModUpGroup + r]);
  }
  u64* out = a.out + (static_cast<int64_t>(j) * a.rows + r0) * a.n + i;
#pragma unroll
  for (int r = 0; r < kModUpGroup; ++r)
    if (r < width) out[r * a.n] = reduce128(acc[r], a.dst[r0 + r]);
}

}  // namespace

void mod_up_conv(const ModUpConvArgs& a, Stream stream) {
  if (a.dnum == 0) return;
  const DeviceScope scope(stream.device);
  const size_t smem = static_cast<size_t>(a.alpha) * (kModUpThreads + kModUpGroup) * sizeof(u64);
  check(cudaFuncSetAttribute(mod_up_conv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
        "cudaFuncSetAttribute(mod_up_conv_kernel)");
  const int groups = (a.rows + kModUpGroup - 1) / kModUpGroup;
  const dim3 grid(blocks_for(a.n, kModUpThreads), static_cast<unsigned>(a.dnum * groups));
  mod_up_conv_kernel<<<grid, kModUpThreads, smem, native(stream)>>>(a, groups);
  check_launch("mod_up_conv_kernel");
}

void ks_inner_product(const KsInnerProductArgs& a, Stream stream) {
  if (a.limbs == 0) return;
  const DeviceScope scope(stream.device);
  const dim3 grid(blocks_for(a.n, kThreads), static_cast<unsigned>(a.limbs));
  ks_inner_product_kernel<<<grid, kThreads, 0, native(stream)>>>(a);
  check_launch("ks_inner_product_kernel");
}

}  // namespace fhe::cuda
