// CPU key-switching inner product: one (limb, output component) row per task.
#include <ATen/Parallel.h>

#include "../kernels.h"

namespace fhe::cpu {

void ks_inner_product(const KsInnerProductArgs& a) {
  at::parallel_for(0, 2 * static_cast<int64_t>(a.limbs), 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t c = task / a.limbs, limb = task % a.limbs;
      const Modulus m = a.moduli[limb];
      const int64_t key_row = ks_key_row(static_cast<int>(limb), a.q_count, a.p_row);
      u64* out = a.out + (c * a.limbs + limb) * a.n;
      for (int64_t i = 0; i < a.n; ++i) {
        U128 acc{0, 0};
        for (int j = 0; j < a.dnum; ++j) {
          const u64 d = a.digits[(j * a.limbs + limb) * a.n + i];
          const u64 k = a.key[((j * 2 + c) * a.key_rows + key_row) * a.n + i];
          mac128(acc, d, k);
        }
        out[i] = reduce128(acc, m);
      }
    }
  });
}

}  // namespace fhe::cpu
