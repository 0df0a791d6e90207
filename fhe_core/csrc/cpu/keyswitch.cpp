// CPU key-switching inner product (and ntt_inner_product: ModUp's NTT, then it): one limb (both output components)
// per task, so each digit row is read once for the two products with the key.
//
// Primes below 2^50 (with the dnum-term sum within ifma::SumBound) on a CPU with AVX-512 IFMA
// take the vector path; the others the scalar 128-bit accumulation. Same canonical outputs.
#include <ATen/Parallel.h>

#include "../kernels.h"
#include "parallel.h"
#include "ifma.h"

namespace fhe::cpu {
namespace {

void limb_scalar(const KsInnerProductArgs& a, int64_t limb, const Modulus& m) {
  const int64_t key_row = ks_key_row(static_cast<int>(limb), a.q_count, a.p_row);
  for (int c = 0; c < 2; ++c) {
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
}

#if FHE_CPU_HAVE_IFMA
// 16 coefficients of both components per step: four independent accumulators. n % 16 == 0.
FHE_IFMA_FN void limb_vector(const KsInnerProductArgs& a, int64_t limb, const ifma::Reducer& red) {
  using namespace ifma;
  const int64_t key_row = ks_key_row(static_cast<int>(limb), a.q_count, a.p_row);
  u64* out0 = a.out + limb * a.n;
  u64* out1 = a.out + (a.limbs + limb) * a.n;
  for (int64_t i = 0; i < a.n; i += 16) {
    Acc acc[4] = {acc_zero(), acc_zero(), acc_zero(), acc_zero()};
    for (int j = 0; j < a.dnum; ++j) {
      const u64* d = a.digits + (j * a.limbs + limb) * a.n + i;
      const u64* k0 = a.key + ((j * 2) * a.key_rows + key_row) * a.n + i;
      const u64* k1 = k0 + a.key_rows * a.n;
      const __m512i d_lo = load(d), d_hi = load(d + 8);
      mac(acc[0], d_lo, load(k0));
      mac(acc[1], d_hi, load(k0 + 8));
      mac(acc[2], d_lo, load(k1));
      mac(acc[3], d_hi, load(k1 + 8));
    }
    store(out0 + i, reduce(acc[0], red));
    store(out0 + i + 8, reduce(acc[1], red));
    store(out1 + i, reduce(acc[2], red));
    store(out1 + i + 8, reduce(acc[3], red));
  }
}
#endif

}  // namespace

void ks_inner_product(const KsInnerProductArgs& a) {
#if FHE_CPU_HAVE_IFMA
  const bool simd = ifma_enabled() && a.n % 16 == 0;
#endif
  at::parallel_for(0, static_cast<int64_t>(a.limbs), parallel_grain(3 * a.dnum * a.n), [&](int64_t begin, int64_t end) {
    for (int64_t limb = begin; limb < end; ++limb) {
      const Modulus m = a.moduli[limb];
#if FHE_CPU_HAVE_IFMA
      ifma::SumBound bound;
      for (int j = 0; j < a.dnum; ++j) bound.add(m.value, m.value);  // digit and key residues < q
      if (simd && bound.fits(m.value)) {
        limb_vector(a, limb, ifma::make_reducer(m.value));
        continue;
      }
#endif
      limb_scalar(a, limb, m);
    }
  });
}

// The forward NTT (skipping the digits' own rows), then the inner product.
void ntt_inner_product(const NttInnerProductArgs& args) {
  ntt_forward(args.ntt);
  ks_inner_product(args.ip);
}

}  // namespace fhe::cpu
