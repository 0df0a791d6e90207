// CPU twins of cuda/fused.cu (see kernels.h): the same residues, word for word (every step is an
// exact modular operation on canonical values; the 128-bit sums are reduced once, as there).
#include <ATen/Parallel.h>

#include "../common/ntt.h"
#include "../kernels.h"
#include "parallel.h"

namespace fhe::cpu {

void ks_inner_product_fused(const KsInnerProductFusedArgs& f) {
  const KsInnerProductArgs& a = f.base;
  at::parallel_for(0, static_cast<int64_t>(a.limbs), parallel_grain(3 * a.dnum * a.n), [&](int64_t begin, int64_t end) {
    for (int64_t limb = begin; limb < end; ++limb) {
      const Modulus m = a.moduli[limb];
      const int64_t key_row = ks_key_row(static_cast<int>(limb), a.q_count, a.p_row);
      const int64_t add_row = limb - (a.limbs - f.add_rows);
      u64* out0 = a.out + limb * a.n;
      u64* out1 = out0 + f.out_stride;
      for (int64_t x = 0; x < a.n; ++x) {
        const int64_t src = f.galois == 1 ? x : galois_ntt_source(static_cast<u32>(x), f.galois, f.log_n);
        U128 acc0{0, 0}, acc1{0, 0};
        for (int j = 0; j < a.dnum; ++j) {
          const u64 d = a.digits[(j * a.limbs + limb) * a.n + src];
          const u64* k = a.key + (j * 2 * a.key_rows + key_row) * a.n + x;
          mac128(acc0, d, k[0]);
          mac128(acc1, d, k[a.key_rows * a.n]);
        }
        u64 r0 = reduce128(acc0, m), r1 = reduce128(acc1, m);
        if (f.add != nullptr && add_row >= 0) {
          const int64_t s = f.add_galois == 1 ? x : galois_ntt_source(static_cast<u32>(x), f.add_galois, f.log_n);
          r0 = add_mod(r0, f.add[add_row * a.n + s], m.value);
        }
        if (f.accumulate) {
          r0 = add_mod(r0, out0[x], m.value);
          r1 = add_mod(r1, out1[x], m.value);
        }
        out0[x] = r0;
        out1[x] = r1;
      }
    }
  });
}

void linear_combination(const LinearCombinationArgs& a) {
  const int64_t rows = a.batch * a.limbs;
  at::parallel_for(0, rows, parallel_grain((a.count + 1) * a.n), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int limb = static_cast<int>(row % a.limbs);
      const int64_t b = row / a.limbs;
      const Modulus m = a.moduli[limb];
      const bool constant = a.constant != nullptr && b < a.constant_components;
      u64* out = a.out + row * a.n;
      for (int half = 0; half < 2; ++half) {
        const int64_t lo = half * (a.n / 2), hi = lo + a.n / 2;
        for (int64_t x = lo; x < hi; ++x) {
          U128 acc{0, 0};
          for (int k = 0; k < a.count; ++k)
            mac128(acc, a.terms[k][b * a.term_stride[k] + limb * a.n + x],
                   a.weights[(static_cast<int64_t>(k) * a.limbs + limb) * 2 + half]);
          u64 r = reduce128(acc, m);
          if (constant) r = add_mod(r, a.constant[limb * 2 + half], m.value);
          out[x] = r;
        }
      }
    }
  });
}

}  // namespace fhe::cpu
