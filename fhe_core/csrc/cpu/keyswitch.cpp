// CPU key-switching inner product (and ntt_inner_product: ModUp's NTT, then it): one limb (both output components)
// per task, so each digit row is read once for the two products with the key.
//
// On the IFMA path (path.h), primes below 2^50 with the dnum-term sum within ifma::SumBound take the IFMA rows; on
// the AVX2 path, primes below 2^46 the double-precision ones; the others the scalar 128-bit accumulation. Same
// canonical outputs.
#include <ATen/Parallel.h>

#include "../kernels.h"
#include "parallel.h"
#include "avx2.h"
#include "ifma.h"
#include "scalar.h"

namespace fhe::cpu {
namespace {

// One limb's rows: digit j at digits + j * digit_stride, the key's components at key0 / key1 + j * key_stride.
struct LimbRows {
  const u64 *digits, *key0, *key1;
  int64_t digit_stride, key_stride;
  u64 *out0, *out1;
};

LimbRows limb_rows(const KsInnerProductArgs& a, int64_t limb) {
  const u64* key0 = a.key + ks_key_row(static_cast<int>(limb), a.q_count, a.p_row) * a.n;
  return LimbRows{a.digits + limb * a.n, key0, key0 + a.key_rows * a.n, a.limbs * a.n, 2 * a.key_rows * a.n,
                  a.out + limb * a.n, a.out + (a.limbs + limb) * a.n};
}

// Both components per step (each digit word read once), two coefficients at a time: four independent 128-bit sums.
void limb_scalar(const KsInnerProductArgs& a, int64_t limb, const Modulus& m) {
  const auto [digits, key0, key1, digit_stride, key_stride, out0, out1] = limb_rows(a, limb);
  int64_t i = 0;
  for (; i + 2 <= a.n; i += 2) {
    u128 s00 = 0, s01 = 0, s10 = 0, s11 = 0;  // s<component><coefficient>
    for (int j = 0; j < a.dnum; ++j) {
      const u64* d = digits + j * digit_stride + i;
      const u64* k0 = key0 + j * key_stride + i;
      const u64* k1 = key1 + j * key_stride + i;
      s00 += static_cast<u128>(d[0]) * k0[0];
      s01 += static_cast<u128>(d[1]) * k0[1];
      s10 += static_cast<u128>(d[0]) * k1[0];
      s11 += static_cast<u128>(d[1]) * k1[1];
    }
    out0[i] = reduce_sum(s00, m);
    out0[i + 1] = reduce_sum(s01, m);
    out1[i] = reduce_sum(s10, m);
    out1[i + 1] = reduce_sum(s11, m);
  }
  for (; i < a.n; ++i) {
    u128 s0 = 0, s1 = 0;
    for (int j = 0; j < a.dnum; ++j) {
      const u64 d = digits[j * digit_stride + i];
      s0 += static_cast<u128>(d) * key0[j * key_stride + i];
      s1 += static_cast<u128>(d) * key1[j * key_stride + i];
    }
    out0[i] = reduce_sum(s0, m);
    out1[i] = reduce_sum(s1, m);
  }
}

#if FHE_CPU_X86
// The AVX2 path (avx2.h) for q < 2^46 with dnum q < 2^50: each product reduced in double precision as it is made
// (below 5q/8), the sum exact, made canonical once. Four coefficients of both components per step; n % 4 == 0.
FHE_AVX2_FN void limb_avx2(const KsInnerProductArgs& a, int64_t limb, u64 q_word) {
  using namespace avx2;
  const __m256d q = _mm256_set1_pd(static_cast<double>(q_word)), q_inv = _mm256_set1_pd(1.0 / static_cast<double>(q_word));
  const auto [digits, key0, key1, digit_stride, key_stride, out0, out1] = limb_rows(a, limb);
  for (int64_t i = 0; i < a.n; i += 4) {
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    for (int j = 0; j < a.dnum; ++j) {
      const __m256d d = to_double(load_words(digits + j * digit_stride + i));
      const Twiddle dw{d, _mm256_mul_pd(d, q_inv)};  // shared by both components (mul_any)
      s0 = _mm256_add_pd(s0, mul(to_double(load_words(key0 + j * key_stride + i)), dw, q));
      s1 = _mm256_add_pd(s1, mul(to_double(load_words(key1 + j * key_stride + i)), dw, q));
    }
    store_words(out0 + i, canonical(s0, q, q_inv));
    store_words(out1 + i, canonical(s1, q, q_inv));
  }
}
#endif

#if FHE_CPU_X86
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
#if FHE_CPU_X86
  const CpuPath path = cpu_path();  // once per call (path.h)
  const bool simd = path == CpuPath::kIfma && a.n % 16 == 0;
  const bool avx2 = path == CpuPath::kAvx2 && a.n % 4 == 0;
#endif
  at::parallel_for(0, static_cast<int64_t>(a.limbs), parallel_grain(3 * a.dnum * a.n), [&](int64_t begin, int64_t end) {
    for (int64_t limb = begin; limb < end; ++limb) {
      const Modulus m = a.moduli[limb];
#if FHE_CPU_X86
      ifma::SumBound bound;
      for (int j = 0; j < a.dnum; ++j) bound.add(m.value, m.value);  // digit and key residues < q
      if (simd && bound.fits(m.value)) {
        limb_vector(a, limb, ifma::make_reducer(m.value));
        continue;
      }
      if (avx2 && m.value < kAvx2MaxPrime && static_cast<u64>(a.dnum) * m.value < (u64{1} << 50)) {
        limb_avx2(a, limb, m.value);
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
