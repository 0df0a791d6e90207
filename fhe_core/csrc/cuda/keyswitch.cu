// GPU key-switching inner product: one thread per coefficient of one limb computes both output
// components, reading each digit word once and accumulating the dnum products in 128 bits.
#include "launch.cuh"

namespace fhe::cuda {
namespace {

constexpr int kThreads = 256;

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

}  // namespace

void ks_inner_product(const KsInnerProductArgs& a, Stream stream) {
  if (a.limbs == 0) return;
  const DeviceScope scope(stream.device);
  const dim3 grid(blocks_for(a.n, kThreads), static_cast<unsigned>(a.limbs));
  launch_triggering(ks_inner_product_kernel, grid, kThreads, 0, native(stream), "ks_inner_product_kernel", a);
}

}  // namespace fhe::cuda
